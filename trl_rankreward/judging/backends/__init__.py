"""Chat backends for `LLMJudge`: an OpenAI-compatible server, or an in-process model."""
