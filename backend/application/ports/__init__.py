"""Ports: the Protocols the use cases need. Adapters in `backend.infrastructure` conform to them."""
