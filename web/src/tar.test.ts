// The tar writer round-trips through a reader written here from the format
// (header fields, sizes, padding, the end blocks, PAX records); GNU tar
// reads it too (tar.interop.test.ts).
import { describe, expect, it } from 'vitest'
import { archiveType, uploadOfDrop, uploadOfFolderFiles, type DroppedEntry } from './archive'
import { blockSize, paxRecord, splitName, tarBlob, type TarEntry } from './tar'

const dec = new TextDecoder()
const enc = new TextEncoder()

function str(b: Uint8Array, off: number, len: number): string {
  const f = b.subarray(off, off + len)
  const nul = f.indexOf(0)
  return dec.decode(nul < 0 ? f : f.subarray(0, nul))
}

function oct(b: Uint8Array, off: number, len: number): number {
  return parseInt(str(b, off, len).trim() || '0', 8)
}

interface Read {
  path: string
  typeflag: string
  mode: number
  size: number
  mtime: number
  magic: string
  version: string
  body: string
  /** Bytes from this entry's header to the next one's: must be whole blocks. */
  span: number
}

/** Reads a whole archive strictly: every checksum, every block boundary, the two zero blocks. */
function readTar(b: Uint8Array): Read[] {
  expect(b.length % blockSize).toBe(0)
  const out: Read[] = []
  let off = 0
  let pax: Record<string, string> = {}
  for (;;) {
    const h = b.subarray(off, off + blockSize)
    if (h.every((x) => x === 0)) {
      expect(b.subarray(off).every((x) => x === 0)).toBe(true)
      expect(b.length - off).toBe(2 * blockSize)
      return out
    }
    let sum = 0
    for (let i = 0; i < blockSize; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i]
    expect(oct(h, 148, 8)).toBe(sum)
    const size = oct(h, 124, 12)
    const typeflag = str(h, 156, 1)
    const prefix = str(h, 345, 155)
    const name = str(h, 0, 100)
    const bodyStart = off + blockSize
    const padded = Math.ceil(size / blockSize) * blockSize
    const body = b.subarray(bodyStart, bodyStart + size)
    expect(b.subarray(bodyStart + size, bodyStart + padded).every((x) => x === 0)).toBe(true)
    if (typeflag === 'x') {
      pax = {}
      for (const rec of dec.decode(body).split('\n').filter(Boolean)) {
        const [len, kv] = [rec.slice(0, rec.indexOf(' ')), rec.slice(rec.indexOf(' ') + 1)]
        expect(Number(len)).toBe(enc.encode(rec).length + 1)
        pax[kv.slice(0, kv.indexOf('='))] = kv.slice(kv.indexOf('=') + 1)
      }
    } else {
      out.push({
        path: pax.path ?? (prefix ? `${prefix}/${name}` : name),
        typeflag,
        mode: oct(h, 100, 8),
        size: pax.size ? Number(pax.size) : size,
        mtime: oct(h, 136, 12),
        magic: str(h, 257, 6),
        version: dec.decode(h.subarray(263, 265)),
        body: dec.decode(body),
        span: blockSize + padded,
      })
      pax = {}
    }
    off = bodyStart + padded
  }
}

async function bytes(blob: Blob): Promise<Uint8Array> {
  return new Uint8Array(await blob.arrayBuffer())
}

describe('tarBlob', () => {
  it('round-trips a tiny project: header fields, sizes, padding, end blocks', async () => {
    const entries: TarEntry[] = [
      { path: '.gitignore', type: 'file', body: enc.encode('node_modules\n'), mtime: 1700000000 },
      { path: 'src', type: 'dir' },
      { path: 'src/main.go', type: 'file', body: new Blob(['package main\n']), mode: 0o755 },
      { path: 'empty.txt', type: 'file', body: new Uint8Array(0) },
      { path: 'block.bin', type: 'file', body: new Uint8Array(blockSize).fill(0x61) },
    ]
    const got = readTar(await bytes(tarBlob(entries)))
    expect(got.map((e) => [e.path, e.typeflag, e.mode, e.size])).toEqual([
      ['.gitignore', '0', 0o644, 13],
      ['src/', '5', 0o755, 0],
      ['src/main.go', '0', 0o755, 13],
      ['empty.txt', '0', 0o644, 0],
      ['block.bin', '0', 0o644, 512],
    ])
    expect(got[0].body).toBe('node_modules\n')
    expect(got[0].mtime).toBe(1700000000)
    expect(got[2].body).toBe('package main\n')
    // A 13-byte body fills one block; an empty one none; exactly 512 bytes one, not two.
    expect(got.map((e) => e.span)).toEqual([1024, 512, 1024, 512, 1024])
    for (const e of got) {
      expect(e.magic).toBe('ustar')
      expect(e.version).toBe('00')
    }
  })

  it('writes the empty archive as two zero blocks', async () => {
    const b = await bytes(tarBlob([]))
    expect(b.length).toBe(1024)
    expect(b.every((x) => x === 0)).toBe(true)
  })

  it('splits a long name into prefix and name, and carries a longer one in a PAX record', async () => {
    const long = `${'d'.repeat(60)}/${'e'.repeat(60)}/file.txt`
    const longer = `${'x'.repeat(200)}/y.txt`
    const unicode = `docs/${'é'.repeat(60)}.md` // 125 bytes in UTF-8, no slash to split at within the name field
    const got = readTar(
      await bytes(
        tarBlob([
          { path: long, type: 'file', body: enc.encode('a') },
          { path: longer, type: 'file', body: enc.encode('b') },
          { path: unicode, type: 'file', body: enc.encode('c') },
        ]),
      ),
    )
    expect(got.map((e) => [e.path, e.body])).toEqual([
      [long, 'a'],
      [longer, 'b'],
      [unicode, 'c'],
    ])
  })
})

describe('splitName', () => {
  const cases: { name: string; path: string; want: [string, string] | null }[] = [
    { name: 'short', path: 'a/b.txt', want: ['', 'a/b.txt'] },
    { name: 'exactly 100', path: 'a'.repeat(100), want: ['', 'a'.repeat(100)] },
    { name: 'splits at the slash', path: `${'p'.repeat(120)}/n.txt`, want: ['p'.repeat(120), 'n.txt'] },
    { name: 'no slash', path: 'a'.repeat(101), want: null },
    { name: 'prefix too long', path: `${'p'.repeat(156)}/n`, want: null },
    { name: 'name part too long', path: `p/${'n'.repeat(101)}`, want: null },
  ]
  for (const c of cases) {
    it(c.name, () => {
      const got = splitName(enc.encode(c.path))
      expect(got && [dec.decode(got.prefix), dec.decode(got.name)]).toEqual(c.want)
    })
  }
})

describe('paxRecord', () => {
  // The length counts its own digits: these cross from one digit count to the next.
  for (const v of ['x', 'x'.repeat(89), 'x'.repeat(90), 'x'.repeat(91), 'x'.repeat(92), 'x'.repeat(95), 'x'.repeat(990), 'x'.repeat(996)]) {
    it(`counts itself for a ${v.length}-byte value`, () => {
      const r = paxRecord('path', v)
      expect(Number(r.slice(0, r.indexOf(' ')))).toBe(enc.encode(r).length)
      expect(r.endsWith(`path=${v}\n`)).toBe(true)
    })
  }
})

describe('archiveType', () => {
  const cases: [string, string, string | null][] = [
    ['project.tar', '', 'application/x-tar'],
    ['project.tar.gz', '', 'application/gzip'],
    ['project.TGZ', '', 'application/gzip'],
    ['project.zip', '', 'application/zip'],
    ['download', 'application/zip', 'application/zip'],
    ['notes.txt', 'text/plain', null],
  ]
  for (const [name, type, want] of cases) it(`archiveType(${name}, ${type || '""'}) = ${want}`, () => expect(archiveType(name, type)).toBe(want))
})

/** A dropped-entry tree from plain objects, batched the way readEntries answers. */
function file(name: string, content: string): DroppedEntry {
  return { isFile: true, isDirectory: false, name, file: (ok) => ok(new File([content], name, { lastModified: 0 })) }
}
function dir(name: string, kids: DroppedEntry[]): DroppedEntry {
  return {
    isFile: false,
    isDirectory: true,
    name,
    createReader: () => {
      const batches = [kids.slice(0, 1), kids.slice(1), []]
      return { readEntries: (ok) => ok(batches.shift() ?? []) }
    },
  }
}

describe('uploadOfDrop', () => {
  it('packs a dropped folder’s contents, dotfiles and all, at the top of the tar', async () => {
    const u = await uploadOfDrop([dir('project', [file('README.md', 'hi'), file('.gitignore', 'x'), dir('.github', [file('ci.yml', 'y')])])], [])
    if ('error' in u) throw new Error(u.error)
    expect(u.contentType).toBe('application/x-tar')
    expect(u.label).toContain('project')
    const got = readTar(await bytes(u.body))
    expect(got.map((e) => e.path)).toEqual(['.github/', '.github/ci.yml', '.gitignore', 'README.md'])
    expect(got[1].body).toBe('y')
  })

  it('sends a dropped archive as it is', async () => {
    const f = new File(['PK'], 'site.zip')
    const u = await uploadOfDrop([file('site.zip', 'PK')], [f])
    expect(u).toEqual({ label: 'site.zip', body: f, contentType: 'application/zip' })
  })

  it('refuses a dropped file that is not an archive, in words', async () => {
    const u = await uploadOfDrop([file('notes.txt', 'x')], [new File(['x'], 'notes.txt')])
    expect(u).toEqual({ error: expect.stringContaining('notes.txt is not an archive') })
  })
})

describe('uploadOfFolderFiles', () => {
  it('drops the folder’s own name from each path', async () => {
    const withPath = (rel: string, content: string) => {
      const f = new File([content], rel.split('/').pop()!)
      Object.defineProperty(f, 'webkitRelativePath', { value: rel })
      return f
    }
    const u = uploadOfFolderFiles([withPath('proj/b.txt', 'b'), withPath('proj/.env', 'SECRET=1')])
    if ('error' in u) throw new Error(u.error)
    expect(readTar(await bytes(u.body)).map((e) => [e.path, e.body])).toEqual([
      ['.env', 'SECRET=1'],
      ['b.txt', 'b'],
    ])
  })
})
