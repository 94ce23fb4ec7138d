'use strict'
// Which native binary this machine needs, named as napi-rs names it: the
// suffix of the local file `shared-futex.<suffix>.node` (a source build) and
// of the prebuilt package `shared-futex-<suffix>`. The generated loader
// (binding.js) asks for the same names; this module only says what it looks
// for, so that the install script and the load error can name it.
const fs = require('fs')
const path = require('path')

const NAME = 'shared-futex'
const ROOT = path.join(__dirname, '..')

// glibc or musl, as the loader decides it: the text of /usr/bin/ldd, then the
// C library Node reports it was started with.
function linuxLibc () {
  try {
    return fs.readFileSync('/usr/bin/ldd', 'utf8').includes('musl') ? 'musl' : 'gnu'
  } catch (e) {}
  try {
    const header = process.report && process.report.getReport().header
    if (header && header.glibcVersionRuntime) return 'gnu'
    return 'musl'
  } catch (e) {}
  return 'gnu'
}

function suffixFor (platform, arch, libc) {
  switch (platform) {
    case 'linux':
      if (arch === 'arm') return `linux-arm-${libc === 'musl' ? 'musleabihf' : 'gnueabihf'}`
      return `linux-${arch}-${libc}`
    case 'win32': {
      // A MinGW-built Node asks for the gnu binary, every other one for msvc.
      const v = (process.config && process.config.variables) || {}
      const gnu = v.shlib_suffix === 'dll.a' || v.node_target_type === 'shared_library'
      return `win32-${arch}-${gnu ? 'gnu' : 'msvc'}`
    }
    case 'android':
      return arch === 'arm' ? 'android-arm-eabi' : `android-${arch}`
    default:
      return `${platform}-${arch}`
  }
}

// This machine: { platform, arch, libc, suffix, packageName, localFile,
// description } (description: "platform linux, arch x64, libc glibc", for
// messages).
function host () {
  const { platform, arch } = process
  const libc = platform === 'linux' ? linuxLibc() : null
  const suffix = suffixFor(platform, arch, libc)
  return {
    platform,
    arch,
    libc,
    suffix,
    description: `platform ${platform}, arch ${arch}${libc ? `, libc ${libc === 'gnu' ? 'glibc' : libc}` : ''}`,
    packageName: `${NAME}-${suffix}`,
    localFile: path.join(ROOT, `${NAME}.${suffix}.node`)
  }
}

// The platform packages this copy of the package was published with: the
// `optionalDependencies` that `napi pre-publish` writes. A checkout of the
// repository has none.
function publishedPackages () {
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
  return Object.keys(manifest.optionalDependencies || {})
    .filter((name) => name.startsWith(`${NAME}-`))
}

module.exports = { NAME, ROOT, host, suffixFor, publishedPackages }
