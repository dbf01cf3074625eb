"""The LLM providers: the OpenAI chat-completions and Anthropic Messages protocols over aiohttp.

A stage asks :class:`~overbrainer.providers.registry.ProviderSet` for the client of a provider;
the client is made (and its key resolved) on first use, so a stage with nothing to do contacts
no provider and needs no credentials.
"""
