"""Served providers: an engine started on a target for the commands that need it.

``records`` keeps what is up (``.overbrainer/serve/PROVIDER.json``), ``ready`` tells when
an engine answers, ``session`` starts, reaches and ends them for one command (and for
``overbrainer serve``). docs/serving.md describes the whole.
"""
