"""After training: ``export`` (GGUF and an Ollama Modelfile), ``push`` (the Hugging Face Hub)
and ``compare`` (the child against its parent, judged)."""
