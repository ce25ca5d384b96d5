"""Where llmc keeps its files, and the TOML profiles that describe servers, policy and LLM."""
