// A certified OpenID provider (panva's oidc-provider) for the console's sign-in tests, started by
// tests/accounts/oidc_fixtures.py. People and their groups live in a JSON file the test writes and
// may rewrite between two sign-ins (USERS_FILE: {"alice": {"password", "email", "groups": [...]}}).
// The login page is this script's own: a form posting login and password; consent is given at once.
import fs from 'node:fs';
import http from 'node:http';
import { URLSearchParams } from 'node:url';
import Provider from 'oidc-provider';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};
const port = Number(env('PORT'));
const issuer = `http://127.0.0.1:${port}`;
const users = () => JSON.parse(fs.readFileSync(env('USERS_FILE'), 'utf8'));

const provider = new Provider(issuer, {
  clients: [{
    client_id: env('CLIENT_ID'),
    client_secret: env('CLIENT_SECRET'),
    redirect_uris: [env('REDIRECT_URI')],
    post_logout_redirect_uris: [env('POST_LOGOUT_REDIRECT_URI')],
    backchannel_logout_uri: env('BACKCHANNEL_LOGOUT_URI'),
    backchannel_logout_session_required: true,
    grant_types: ['authorization_code'],
    response_types: ['code'],
  }],
  async findAccount(ctx, id) {
    const person = users()[id];
    if (!person) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, preferred_username: id, email: person.email, email_verified: true, groups: person.groups || [] };
      },
    };
  },
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['preferred_username'], groups: ['groups'] },
  scopes: ['openid', 'email', 'profile', 'groups'],
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    backchannelLogout: { enabled: true },
    rpInitiatedLogout: { enabled: true },
  },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  cookies: { keys: ['test-only-cookie-key'] },
  // The console under test listens on the loopback address, which the provider's guard against
  // server-side request forgery refuses: its back-channel logout calls go out without that guard here.
  fetch: (url, options) => {
    const { dispatcher, ...rest } = options;
    return fetch(url, rest);
  },
});

const page = (uid, error) => `<!doctype html><title>Sign in</title>
<form method="post" action="/interaction/${uid}/login">${error ? `<p class="error">${error}</p>` : ''}
<input name="login"><input name="password" type="password"><button>Sign in</button></form>`;

const readBody = (req) => new Promise((resolve) => {
  let body = '';
  req.on('data', (chunk) => { body += chunk; });
  req.on('end', () => resolve(new URLSearchParams(body)));
});

async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { uid, prompt, params } = details;
  if (prompt.name === 'login' && req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(page(uid));
    return;
  }
  if (prompt.name === 'login') {
    const form = await readBody(req);
    const person = users()[form.get('login')];
    if (!person || person.password !== form.get('password')) {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(page(uid, 'Wrong login or password'));
      return;
    }
    await provider.interactionFinished(req, res, { login: { accountId: form.get('login') } }, { mergeWithLastSubmission: false });
    return;
  }
  // consent: everything the console asked for
  const grant = new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
  if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
  if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

// The tests read these lines to know a back-channel logout was sent.
provider.on('backchannel.error', (ctx, err) => console.log(`backchannel.error ${err} ${err.cause}`));
provider.on('backchannel.success', () => console.log('backchannel.success'));
provider.on('server_error', (ctx, err) => console.log(`server_error ${err}`));
const callback = provider.callback();
http.createServer((req, res) => {
  if (req.url.startsWith('/interaction/')) {
    interaction(req, res).catch((err) => {
      res.writeHead(400, { 'content-type': 'text/plain' });
      res.end(String(err));
    });
    return;
  }
  callback(req, res);
}).listen(port, '127.0.0.1', () => {
  console.log(`ready ${issuer}`);
});
