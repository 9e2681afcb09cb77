"""Bringing other memory into a store (LoCoMo today; more importers come later)."""
