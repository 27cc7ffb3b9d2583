"""Use cases and the ports (Protocols) they need; depends on the domain only."""
