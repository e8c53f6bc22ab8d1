"""SASL on the broker: the mechanisms' servers (``mechanisms``) and the per-connection
exchange (``authenticator``: SaslHandshake, SaslAuthenticate, raw v0 tokens, re-authentication)."""
