"""Security: who a connection is and what it may do.

- ``listener``: each listener's protocol and TLS context, built at start-up;
- ``tls``, ``cipher_suites``: ``ssl.SSLContext`` from Kafka's ``ssl.*`` properties;
- ``ssl_principal``: ``ssl.principal.mapping.rules`` (certificate DN -> user name);
- ``principal``: ``KafkaPrincipal`` (``User:alice``);
- ``sasl``: the SASL mechanisms' servers and the per-connection exchange (authenticator);
- ``jaas``: ``sasl.jaas.config`` text;
- ``entity_store``: user / client-id configs (``EntityConfigStore``; a file on one node);
- ``credentials``, ``scram_admin``: SCRAM credentials and their admin APIs' rules;
- ``acl``, ``authorizer``, ``acl_store``: ACLs, Kafka's AclAuthorizer semantics, and where
  ACLs live (``AclStore``; a file on one node).
"""
