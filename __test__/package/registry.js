'use strict'
// A real npm registry on 127.0.0.1 for the install tests: Verdaccio (a
// devDependency) with its own storage, no uplinks (every package it serves
// was published to it by the test), one user whose token the npm commands
// get through a user config file of their own. Started by the test, stopped
// by it, and killed by its own deadline if the test never stops it.
const { spawn } = require('child_process')
const fs = require('fs')
const http = require('http')
const net = require('net')
const path = require('path')

const { ensure } = require('../../scripts/node-versions')

const VERDACCIO = path.join(__dirname, '..', '..', 'node_modules', 'verdaccio', 'bin', 'verdaccio')
// Verdaccio 6 needs Node 22 or newer: it runs on a pinned Node from the
// version matrix, whatever Node runs the tests.
const REGISTRY_NODE_MAJOR = 24

function freePort () {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

function request (url, { method = 'GET', body, headers = {} } = {}) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body))
    const req = http.request(url, {
      method,
      headers: Object.assign({ accept: 'application/json' }, data ? { 'content-type': 'application/json', 'content-length': data.length } : {}, headers)
    }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (d) => { text += d })
      res.on('end', () => resolve({ status: res.statusCode, text }))
    })
    req.on('error', reject)
    req.setTimeout(10000, () => req.destroy(new Error(`${method} ${url}: no answer in 10 s`)))
    req.end(data)
  })
}

// Starts a registry whose files live in `dir`. Resolves with { url, npmrc,
// env, stop } where `env` holds what every npm command against it needs: the
// user config with registry and token, and a cache of its own (nothing comes
// from a cache shared with other runs).
async function startRegistry (dir, { lifetimeMs = 15 * 60 * 1000 } = {}) {
  fs.mkdirSync(dir, { recursive: true })
  const { bin } = (await ensure([REGISTRY_NODE_MAJOR], () => {}))[REGISTRY_NODE_MAJOR]
  const port = await freePort()
  const url = `http://127.0.0.1:${port}/`
  const config = path.join(dir, 'config.yaml')
  fs.writeFileSync(config, [
    `storage: ${JSON.stringify(path.join(dir, 'storage'))}`,
    'auth:',
    '  htpasswd:',
    `    file: ${JSON.stringify(path.join(dir, 'htpasswd'))}`,
    'uplinks: {}',
    'packages:',
    "  '**':",
    '    access: $all',
    '    publish: $authenticated',
    'web:',
    '  enable: false',
    'max_body_size: 50mb',
    'log: { type: stdout, format: pretty, level: warn }',
    ''
  ].join('\n'))
  const child = spawn(bin, [VERDACCIO, '--config', config, '--listen', `127.0.0.1:${port}`], {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true
  })
  let log = ''
  child.stdout.on('data', (d) => { log += d })
  child.stderr.on('data', (d) => { log += d })
  const exited = new Promise((resolve) => child.on('exit', resolve))
  // The registry never outlives its deadline, whatever happens to the test.
  const deadline = setTimeout(() => stop(), lifetimeMs)
  deadline.unref()
  function stop () {
    clearTimeout(deadline)
    try { process.kill(-child.pid, 'SIGKILL') } catch (e) {}
    return exited
  }
  process.on('exit', stop)

  const started = Date.now()
  for (;;) {
    if (child.exitCode !== null) throw new Error(`verdaccio exited with ${child.exitCode}:\n${log}`)
    try {
      if ((await request(`${url}-/ping`)).status === 200) break
    } catch (e) {}
    if (Date.now() - started > 30000) {
      await stop()
      throw new Error(`verdaccio did not answer on ${url} within 30 s:\n${log}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }

  // A user, as `npm adduser` would create it; its token goes to the npmrc.
  const user = 'ci'
  const res = await request(`${url}-/user/org.couchdb.user:${user}`, {
    method: 'PUT',
    body: { name: user, password: 'ci-password', email: 'ci@example.invalid', type: 'user' }
  })
  if (res.status !== 201) throw new Error(`adding a user to the registry failed: ${res.status} ${res.text}`)
  const { token } = JSON.parse(res.text)
  const npmrc = path.join(dir, 'npmrc')
  fs.writeFileSync(npmrc, `registry=${url}\n//127.0.0.1:${port}/:_authToken=${token}\n`)
  const env = {
    npm_config_userconfig: npmrc,
    npm_config_registry: url,
    npm_config_cache: path.join(dir, 'npm-cache'),
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false'
  }
  return { url, npmrc, env, stop, log: () => log }
}

module.exports = { startRegistry }
