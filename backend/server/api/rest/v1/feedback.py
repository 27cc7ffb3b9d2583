"""POST /api/v1/feedback: thumbs up / down on an assistant message."""

from __future__ import annotations

from fastapi import APIRouter

from backend.domain.conversation import FeedbackRecord
from backend.server.api_responses import errors
from backend.server.deps import PrincipalDep, ServicesDep
from backend.server.models.requests import FeedbackRequest
from backend.server.models.responses import FeedbackResponse

router = APIRouter(prefix="/api/v1", tags=["feedback"])


@router.post("/feedback", response_model=FeedbackResponse, responses=errors(404))
async def feedback(body: FeedbackRequest, services: ServicesDep, principal: PrincipalDep) -> FeedbackResponse:
    user = principal.resolve_user(body.user_id)
    record = FeedbackRecord(
        message_id=body.message_id,
        is_positive=body.is_positive,
        query=body.query,
        thread_id=body.session_id or "",
        agent_type=body.agent_type,
        metadata=body.metadata,
    )
    feedback_id = await services.feedback.submit(user, record)
    return FeedbackResponse(feedback_id=feedback_id)
