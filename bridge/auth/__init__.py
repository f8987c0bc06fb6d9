"""OAuth for url servers: whose account a call uses, the SDK's client auth, encrypted tokens, the sign-in redirect.

- `tokens`: the vault (AES-GCM at rest, keyed by server and identity) and the SDK `TokenStorage` over it;
- `oauth`: which SDK provider a server's `auth:` block gets, shared per (server, identity);
- `workload`: a service account's token for a workload's own JWT (the JWT-bearer grant, no secret);
- `dpop`: sender-constrained tokens (DPoP proofs, the installation's key) on a provider's requests;
- `callback`: sign-ins in flight by `state` and the redirect handler (an ASGI route, and a loopback listener);
- `company`: the company sign-in (OpenID Connect) and the ID-JAGs it brings `enterprise` servers;
- `terminal`: the sign-in at a terminal (the URL on stderr, the redirect on the loopback listener).
"""
