"""Summaries: the LLM and offline engines, triggers, the loss guard and review branches."""
