// A small tar writer, so a folder dropped on the page can be uploaded as
// one archive through the same import (and the same path checks) as any
// other. Written by hand rather than pulled in: the format needed is tiny —
// POSIX ustar headers in 512-byte blocks, a PAX record only for a name or
// size ustar cannot hold, two zero blocks at the end. Bodies stay Blobs, so
// packing a large folder does not copy its files into memory.

export const blockSize = 512

/** One entry to pack: a file (its body) or a directory (no body). */
export interface TarEntry {
  /** Slash-separated, relative, without a leading "./"; a directory may end in "/". */
  path: string
  type: 'file' | 'dir'
  body?: Blob | Uint8Array
  /** Unix permission bits; 0o644 for files and 0o755 for directories by default. */
  mode?: number
  /** Seconds since the epoch; 0 by default, so the same folder packs the same bytes. */
  mtime?: number
}

const encoder = new TextEncoder()

function sizeOf(body: Blob | Uint8Array | undefined): number {
  if (!body) return 0
  // Not instanceof: a typed array or Blob from another realm (a test's, a worker's) must count too.
  return typeof (body as Blob).size === 'number' ? (body as Blob).size : (body as Uint8Array).byteLength
}

/** Writes s at off in block, NUL-padded to len; false when its bytes do not fit. */
function put(block: Uint8Array, off: number, len: number, s: string | Uint8Array): boolean {
  const b = typeof s === 'string' ? encoder.encode(s) : s
  if (b.length > len) return false
  block.set(b, off)
  return true
}

/** An octal number field: digits, zero-padded, then a NUL, filling len bytes. */
function octal(block: Uint8Array, off: number, len: number, n: number): boolean {
  const digits = n.toString(8)
  if (digits.length > len - 1) return false
  return put(block, off, len, digits.padStart(len - 1, '0') + '\0')
}

/**
 * Splits a name that is too long for the 100-byte name field into the
 * ustar prefix (up to 155 bytes) and name, at a slash; null when no split fits.
 */
export function splitName(name: Uint8Array): { prefix: Uint8Array; name: Uint8Array } | null {
  if (name.length <= 100) return { prefix: new Uint8Array(0), name }
  for (let i = Math.min(name.length - 1, 155); i > 0; i--) {
    if (name[i] === 0x2f && name.length - i - 1 <= 100 && name.length - i - 1 > 0) {
      return { prefix: name.subarray(0, i), name: name.subarray(i + 1) }
    }
  }
  return null
}

/** One ustar header block; name must already fit (see splitName). */
function header(opts: {
  name: Uint8Array
  prefix: Uint8Array
  mode: number
  size: number
  mtime: number
  typeflag: string
}): Uint8Array {
  const h = new Uint8Array(blockSize)
  put(h, 0, 100, opts.name)
  octal(h, 100, 8, opts.mode)
  octal(h, 108, 8, 0) // uid
  octal(h, 116, 8, 0) // gid
  octal(h, 124, 12, opts.size)
  octal(h, 136, 12, opts.mtime)
  put(h, 156, 1, opts.typeflag)
  put(h, 257, 6, 'ustar\0')
  put(h, 263, 2, '00')
  put(h, 345, 155, opts.prefix)
  // The checksum is summed with its own field read as eight spaces.
  h.fill(0x20, 148, 156)
  let sum = 0
  for (const b of h) sum += b
  put(h, 148, 8, sum.toString(8).padStart(6, '0') + '\0 ')
  return h
}

/** One PAX record, "<len> key=value\n", where len counts the whole record. */
export function paxRecord(key: string, value: string): string {
  const rest = ` ${key}=${value}\n`
  const restLen = encoder.encode(rest).length
  let len = restLen + String(restLen).length
  if (String(len).length + restLen !== len) len = restLen + String(len).length
  return `${len}${rest}`
}

function padding(size: number): Uint8Array {
  const r = size % blockSize
  return new Uint8Array(r === 0 ? 0 : blockSize - r)
}

const maxOctalSize = 0o77777777777 // what 11 octal digits hold: 8 GiB - 1

/** The blocks of one entry: a PAX header when needed, the ustar header, the body and its padding. */
function entryParts(e: TarEntry): (Uint8Array | Blob)[] {
  const isDir = e.type === 'dir'
  const path = isDir ? e.path.replace(/\/*$/, '/') : e.path
  const size = isDir ? 0 : sizeOf(e.body)
  const mode = e.mode ?? (isDir ? 0o755 : 0o644)
  const mtime = Math.max(0, Math.floor(e.mtime ?? 0))
  const nameBytes = encoder.encode(path)
  const split = splitName(nameBytes)
  const records: string[] = []
  if (!split) records.push(paxRecord('path', path))
  if (size > maxOctalSize) records.push(paxRecord('size', String(size)))
  const parts: (Uint8Array | Blob)[] = []
  if (records.length > 0) {
    const pax = encoder.encode(records.join(''))
    parts.push(header({ name: encoder.encode('PaxHeader'), prefix: new Uint8Array(0), mode: 0o644, size: pax.length, mtime, typeflag: 'x' }))
    parts.push(pax, padding(pax.length))
  }
  // Where the PAX record carries the real name or size, the ustar fields hold a stand-in.
  const s = split ?? { prefix: new Uint8Array(0), name: nameBytes.subarray(nameBytes.length - 100) }
  parts.push(header({ name: s.name, prefix: s.prefix, mode, size: size > maxOctalSize ? 0 : size, mtime, typeflag: isDir ? '5' : '0' }))
  if (!isDir && e.body) {
    parts.push(e.body, padding(size))
  }
  return parts
}

/** The parts of a whole archive, in order: every entry, then two zero blocks. */
export function tarParts(entries: TarEntry[]): (Uint8Array | Blob)[] {
  const parts = entries.flatMap(entryParts)
  parts.push(new Uint8Array(2 * blockSize))
  return parts
}

/** The archive as a Blob, ready to upload with Content-Type application/x-tar. */
export function tarBlob(entries: TarEntry[]): Blob {
  return new Blob(tarParts(entries) as BlobPart[], { type: 'application/x-tar' })
}
