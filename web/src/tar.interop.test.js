// GNU tar, when the machine has it, lists and extracts what the tar writer
// wrote, byte for byte. It uses Node's modules, so it is JavaScript: the
// type check (tsc, with no Node types) leaves .js files out.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { tarBlob } from './tar'

const enc = new TextEncoder()

async function bytes(blob) {
  return new Uint8Array(await blob.arrayBuffer())
}

const gnuTar = ['/usr/bin/tar', '/bin/tar'].find((p) => existsSync(p))

describe.skipIf(!gnuTar)('GNU tar reads it', () => {
  it('lists and extracts every entry byte for byte', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tar-test-'))
    try {
      const longer = `${'x'.repeat(200)}/y.txt`
      const b = await bytes(
        tarBlob([
          { path: '.env.example', type: 'file', body: enc.encode('KEY=\n') },
          { path: '.github', type: 'dir' },
          { path: '.github/ci.yml', type: 'file', body: enc.encode('on: push\n') },
          { path: longer, type: 'file', body: enc.encode('deep') },
        ]),
      )
      writeFileSync(join(dir, 'a.tar'), b)
      const list = spawnSync(gnuTar, ['-tf', 'a.tar'], { cwd: dir, encoding: 'utf8' })
      expect(list.status, list.stderr).toBe(0)
      expect(list.stdout.trim().split('\n')).toEqual(['.env.example', '.github/', '.github/ci.yml', longer])
      const x = spawnSync(gnuTar, ['-xf', 'a.tar', '-C', dir], { cwd: dir, encoding: 'utf8' })
      expect(x.status, x.stderr).toBe(0)
      expect(readFileSync(join(dir, '.github/ci.yml'), 'utf8')).toBe('on: push\n')
      expect(readFileSync(join(dir, longer), 'utf8')).toBe('deep')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

