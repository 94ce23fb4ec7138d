'use strict'
// A real program on the Channel: a log transport (the main thread sends
// JSON lines, a worker appends them to a file), run as its own process with
// a hard timeout. Everything sent is in the file when the process exits,
// however it exits, once the sender flushes (docs/channel.md, "Before the
// process exits"); a transport that crashes makes the sender's next send
// throw ChannelDisconnectedError instead of blocking it for ever.
const assert = require('assert')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { test, describe } = require('./harness')
const { runChild, transcript } = require('./util')

const MAIN = path.join(__dirname, 'fixtures', 'transport', 'main.js')
// pino 9 needs a Node newer than the oldest this package supports.
const PINO = (() => {
  try {
    require('pino')
    return {}
  } catch (e) {
    return { skip: `pino does not load on Node ${process.version} (${e.message})` }
  }
})()
const LINES = 100000

function run (end, crashAt) {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'shared-futex-transport-')), 'app.log')
  return runChild([MAIN, file, String(LINES), end].concat(crashAt ? [String(crashAt)] : []), { timeoutMs: 60000 }).then((r) => {
    const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : ''
    fs.unlinkSync(file)
    fs.rmdirSync(path.dirname(file))
    const lines = text.split('\n').filter(Boolean)
    return { r, lines }
  })
}

describe('Channel: a log transport', () => {
  for (const end of ['return', 'exit']) {
    test(`every line is in the file when the process ends (${end === 'exit' ? 'process.exit() right after the last send' : 'the script ends'}): flushSync in an exit handler`, { timeout: 70000 }, async () => {
      const { r, lines } = await run(end)
      assert.ok(!r.timedOut && r.code === 0, transcript(r))
      assert.strictEqual(lines.length, LINES)
      assert.ok(lines.every((l, i) => JSON.parse(l).msg === `line ${i}`), 'in order, intact')
    })
  }

  test('pino logging through the channel (its destination sends each line): every record in the file, in order, after process.exit()', Object.assign({ timeout: 70000 }, PINO), async () => {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'shared-futex-pino-')), 'app.log')
    const r = await runChild([path.join(__dirname, 'fixtures', 'transport', 'pino-app.js'), file, '50000'], { timeoutMs: 60000 })
    const records = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
    fs.unlinkSync(file)
    fs.rmdirSync(path.dirname(file))
    assert.ok(!r.timedOut && r.code === 0, transcript(r))
    assert.strictEqual(records.length, 50000)
    assert.ok(records.every((rec, i) => rec.i === i && rec.msg === 'hello' && rec.app === 'transport-test' && rec.level === 30))
  })

  test('a transport that crashes: the next send throws ChannelDisconnectedError, the process exits', { timeout: 70000 }, async () => {
    const { r, lines } = await run('return', 5000)
    assert.ok(!r.timedOut && r.code === 0, transcript(r))
    assert.match(r.stdout, /^send: ChannelDisconnectedError after \d+ lines$/m)
    // Lines left in the ring (if the worker died before taking them all)
    // are reported lost by the flush at exit, never waited for.
    for (const m of r.stdout.matchAll(/^flush: (.*)$/gm)) assert.strictEqual(m[1], 'ChannelDisconnectedError')
    assert.ok(lines.length >= 5000 && lines.length < LINES)
  })
})
