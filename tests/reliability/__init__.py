"""Reliability scenarios: processes killed, racing and fed hostile input (`-m reliability`)."""
