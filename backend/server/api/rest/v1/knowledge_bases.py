"""Knowledge bases: list and create them; ingest, list, get and delete documents; retrieve (admin writes)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Query, Request, Response, UploadFile, status
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from backend.application.ports.ingestion import SourceDocument
from backend.domain.errors import InvalidRequest
from backend.domain.text import check_text, field_name
from backend.server.api_responses import REF, errors
from backend.server.deps import AdminDep, PrincipalDep, ServicesDep
from backend.server.models.jobs import JobOut, JobsResponse
from backend.server.models.knowledge import (
    MAX_DOCUMENTS_PER_REQUEST,
    CreateKnowledgeBase,
    DocumentOut,
    DocumentsResponse,
    DocumentWithText,
    IngestRequest,
    IngestResponse,
    KnowledgeBaseOut,
    KnowledgeBasesResponse,
    RetrieveRequest,
    RetrieveResponse,
)

router = APIRouter(prefix="/api/v1/kbs", tags=["knowledge bases"])


DOCUMENTS_BODY = {
    "content": {
        # The route reads its body itself (JSON or files); api_description adds IngestRequest to the components.
        "application/json": {"schema": {"$ref": REF + "IngestRequest"}},
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "properties": {
                    "files": {
                        "type": "array",
                        "items": {"type": "string", "format": "binary"},
                        "description": f"txt, md, pdf, docx, json, jsonl: at most {MAX_DOCUMENTS_PER_REQUEST} "
                        "documents in all (a json or jsonl file holds one per record)",
                    }
                },
            }
        },
    },
    "required": True,
}


@router.get("", response_model=KnowledgeBasesResponse)
async def list_knowledge_bases(services: ServicesDep, principal: PrincipalDep) -> KnowledgeBasesResponse:
    del principal  # any authenticated caller may list
    return KnowledgeBasesResponse(
        knowledge_bases=[KnowledgeBaseOut.of(kb) for kb in await services.knowledge.list_kbs()],
        agent_types=sorted(services.agent_types),
        generation_mode=services.generation_mode,
    )


@router.post("", response_model=KnowledgeBaseOut, status_code=status.HTTP_201_CREATED, responses=errors(409))
async def create_knowledge_base(body: CreateKnowledgeBase, services: ServicesDep, admin: AdminDep) -> KnowledgeBaseOut:
    if body.default_agent not in services.agent_types:
        raise InvalidRequest(f"default_agent must be one of: {', '.join(sorted(services.agent_types))}")
    return KnowledgeBaseOut.of(await services.knowledge.create_kb(body.to_domain()))


async def _documents_from(
    request: Request, services: ServicesDep, files: list[UploadFile] | None
) -> list[SourceDocument]:
    if files:
        await _check_form_fields(request)
        documents: list[SourceDocument] = []
        for upload in files:
            documents.extend(services.knowledge.load_upload(upload.filename or "upload.txt", await upload.read()))
        return documents
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            body = IngestRequest.model_validate_json(await request.body())
        except ValidationError as error:
            # The body is read by hand (it may be multipart instead), so report it as FastAPI would.
            raise RequestValidationError(error.errors(include_url=False)) from error
        return [document.to_source() for document in body.documents]
    raise InvalidRequest("send JSON {\"documents\": [...]} or multipart files in the field 'files'")


async def _check_form_fields(request: Request) -> None:
    """The form's text fields pass the same check as every other text (the files are checked as they load)."""
    for key, value in (await request.form()).multi_items():
        check_text(key, "a form field's name")
        if isinstance(value, str):
            check_text(value, f"form field {field_name(key)}")


@router.post(
    "/{kb_prefix}/documents",
    response_model=JobOut | IngestResponse,
    status_code=status.HTTP_202_ACCEPTED,
    openapi_extra={"requestBody": DOCUMENTS_BODY},
    responses={201: {"model": IngestResponse, "description": "with `wait=true`: the job is over"}, **errors(404)},
)
async def ingest_documents(
    kb_prefix: str,
    request: Request,
    response: Response,
    services: ServicesDep,
    admin: AdminDep,
    files: Annotated[list[UploadFile] | None, File(description="txt, md, pdf, docx, json, jsonl")] = None,
    wait: Annotated[bool, Query(description="answer once the job is over, with its report (201)")] = False,
) -> JobOut | IngestResponse:
    """Queue the documents as an ingestion job: `202` with the job, to follow at `GET /api/v1/jobs/{job_id}`."""
    documents = await _documents_from(request, services, files)
    if not documents:
        raise InvalidRequest("no document with text was found in the request")
    if len(documents) > MAX_DOCUMENTS_PER_REQUEST:  # the JSON body is capped by its model; files by this
        raise InvalidRequest(f"at most {MAX_DOCUMENTS_PER_REQUEST} documents per request; split the upload")
    job = await services.jobs.submit(kb_prefix, admin.resolve_user(None), documents)
    if not wait:
        return JobOut.of(job)
    job = await services.jobs.wait(job.job_id)
    response.status_code = status.HTTP_201_CREATED
    return IngestResponse.of(job, await services.jobs.documents(job.job_id))


@router.get("/{kb_prefix}/jobs", response_model=JobsResponse, responses=errors(404))
async def list_jobs(
    kb_prefix: str,
    services: ServicesDep,
    principal: PrincipalDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> JobsResponse:
    """The KB's ingestion jobs, newest first."""
    del principal  # any authenticated caller may read a KB
    return JobsResponse(
        kb_prefix=kb_prefix, jobs=[JobOut.of(job) for job in await services.jobs.list_jobs(kb_prefix, limit)]
    )


@router.get("/{kb_prefix}/documents", response_model=DocumentsResponse, responses=errors(404))
async def list_documents(kb_prefix: str, services: ServicesDep, principal: PrincipalDep) -> DocumentsResponse:
    del principal
    documents = await services.knowledge.list_documents(kb_prefix)
    return DocumentsResponse(kb_prefix=kb_prefix, documents=[DocumentOut.of(d) for d in documents])


@router.get("/{kb_prefix}/documents/{doc_id}", response_model=DocumentWithText, responses=errors(404))
async def get_document(
    kb_prefix: str,
    doc_id: str,
    services: ServicesDep,
    principal: PrincipalDep,
    chunks: Annotated[bool, Query(description="also list the document's chunks, in order")] = False,
) -> DocumentWithText:
    del principal  # any authenticated caller may read, as they may list
    return DocumentWithText.read(await services.knowledge.read_document(kb_prefix, doc_id), chunks)


@router.delete("/{kb_prefix}/documents/{doc_id}", status_code=status.HTTP_204_NO_CONTENT, responses=errors(404))
async def delete_document(kb_prefix: str, doc_id: str, services: ServicesDep, admin: AdminDep) -> Response:
    await services.knowledge.delete_document(kb_prefix, doc_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{kb_prefix}/retrieve", response_model=RetrieveResponse, responses=errors(404, 501, 502))
async def retrieve(
    kb_prefix: str, body: RetrieveRequest, services: ServicesDep, principal: PrincipalDep
) -> RetrieveResponse:
    del principal
    outcome = await services.retrieval.retrieve(kb_prefix, body.query, body.agent_type, body.top_k)
    return RetrieveResponse.of(kb_prefix, outcome)
