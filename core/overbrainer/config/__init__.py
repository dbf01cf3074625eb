"""overbrainer.toml: pydantic models, environment layering, ``.env``, secrets, reload."""
