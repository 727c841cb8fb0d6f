"""Helpers the tests share (not tests themselves, not the product)."""
