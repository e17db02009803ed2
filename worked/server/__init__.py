"""The web page of ``worked serve``: a Starlette app (see :func:`worked.server.app.create_app`).

Nothing here is imported by the other commands; Starlette and uvicorn load only for ``worked serve``.
"""
