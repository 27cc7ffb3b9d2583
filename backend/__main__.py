from backend.cli import app

app()
