"""LLM providers behind one protocol (base.Provider); each SDK is imported only by the provider
that runs (make_provider)."""
