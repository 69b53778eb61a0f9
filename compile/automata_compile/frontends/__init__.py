"""Front ends: each spec language (regex text and its extensions, JSON Schema, dataclasses) → IR."""
