"""Conversation simulation and answer extraction."""
