"""The contents manager ``./course.sh lab`` runs: a notebook opens unmodified and saves normalized.

JupyterLab replaces a notebook's ``metadata.language_info`` with the one the kernel reports (Python's
exact version, codemirror mode, ...) as soon as the kernel starts, and marks the notebook modified
when the two differ. The course stores only ``{"name": "python"}`` (``tcourse.nbtools``: the
version differs between machines), so on opening, this manager hands JupyterLab the language_info
the course kernel (the same Python as this server) will report, and on saving writes the short form
back, leaving ``git status`` clean after a plain open-and-save.
"""
from __future__ import annotations

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

from .nbtools import LANGUAGE_INFO


def kernel_language_info() -> dict:
    from ipykernel.ipkernel import IPythonKernel

    return dict(IPythonKernel.language_info)


class CourseContentsManager(AsyncLargeFileManager):
    async def get(self, path, content=True, type=None, format=None, **kwargs):
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if model["type"] == "notebook" and model.get("content"):
            meta = model["content"]["metadata"]
            if meta.get("language_info", {}).get("name") == LANGUAGE_INFO["name"]:
                meta["language_info"] = kernel_language_info()
        return model

    async def save(self, model, path=""):
        if model.get("type") == "notebook" and model.get("content"):
            meta = model["content"].get("metadata", {})
            if meta.get("language_info", {}).get("name") == LANGUAGE_INFO["name"]:
                meta["language_info"] = dict(LANGUAGE_INFO)
        return await super().save(model, path)
