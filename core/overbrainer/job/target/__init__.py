"""What travels to the target and runs there with the target's Python, never imported by the
core: the job runner (``run_job.py``) and its machine sampler, the trainer's plugins
(``overbrainer_metrics.py``, ``overbrainer_kd.py``), the serve watchdog, and the files they
read (DeepSpeed presets, the pinned constraints of an Axolotl install).

The core reads these as files (``importlib.resources``) and ships their text; each is
stdlib-only (the trainer's plugins add what the trainer's venv holds) and imports nothing of
``overbrainer`` (an import-linter contract holds it), since only the file reaches the target.
"""
