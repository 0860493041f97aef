"""Sign-in through an OpenID provider: the client (provider.py, Authlib's), the roles claim
(roles.py), the audited sign-in, deactivation and logout (services.py) and the pages (views.py)."""
