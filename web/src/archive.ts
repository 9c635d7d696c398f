// What the browser can hand us to import, and how it goes up: an archive
// file as it is (its Content-Type from its name), or a dropped folder
// walked through the File and Directory Entries API and packed into a tar
// (tar.ts). The server checks every path either way; nothing here decides
// what is safe.

import type { TarEntry } from './tar'
import { tarBlob } from './tar'

export const archiveHint = 'A .tar, .tar.gz (.tgz) or .zip archive, or a folder dropped here.'

/** The Content-Type to send an archive with, from its name and type; null when it is not one we take. */
export function archiveType(name: string, type = ''): string | null {
  const n = name.toLowerCase()
  if (n.endsWith('.zip') || type === 'application/zip' || type === 'application/x-zip-compressed') return 'application/zip'
  if (n.endsWith('.tar.gz') || n.endsWith('.tgz') || n.endsWith('.gz') || type === 'application/gzip' || type === 'application/x-gzip') {
    return 'application/gzip'
  }
  if (n.endsWith('.tar') || type === 'application/x-tar') return 'application/x-tar'
  return null
}

/** What is about to be uploaded, with the name to show for it. */
export interface Upload {
  label: string
  body: Blob
  contentType: string
}

/** The parts of the Entries API we use (FileSystemEntry and friends), so tests can hand in plain objects. */
export interface DroppedEntry {
  isFile: boolean
  isDirectory: boolean
  name: string
  file?: (ok: (f: File) => void, fail: (e: unknown) => void) => void
  createReader?: () => { readEntries: (ok: (es: DroppedEntry[]) => void, fail: (e: unknown) => void) => void }
}

/** Every entry of a directory: readEntries answers in batches until it answers none. */
async function children(dir: DroppedEntry): Promise<DroppedEntry[]> {
  const reader = dir.createReader!()
  const all: DroppedEntry[] = []
  for (;;) {
    const batch = await new Promise<DroppedEntry[]>((ok, fail) => reader.readEntries(ok, fail))
    if (batch.length === 0) return all
    all.push(...batch)
  }
}

function byName(a: DroppedEntry, b: DroppedEntry): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0
}

/** Adds e (named prefix + e.name) and, for a directory, everything under it to out. */
export async function walk(e: DroppedEntry, prefix: string, out: TarEntry[] = []): Promise<TarEntry[]> {
  const path = prefix + e.name
  if (e.isFile) {
    const f = await new Promise<File>((ok, fail) => e.file!(ok, fail))
    out.push({ path, type: 'file', body: f, mtime: Math.floor(f.lastModified / 1000) })
  } else if (e.isDirectory) {
    out.push({ path: `${path}/`, type: 'dir' })
    for (const k of (await children(e)).sort(byName)) await walk(k, `${path}/`, out)
  }
  return out
}

/** What a folder holds, named relative to the folder itself. */
export async function packFolder(dir: DroppedEntry): Promise<TarEntry[]> {
  const out: TarEntry[] = []
  for (const k of (await children(dir)).sort(byName)) await walk(k, '', out)
  return out
}

/**
 * Turns what was dropped into one upload: a single archive file as it is; a
 * folder packed into a tar of its contents (the folder itself becomes the
 * workspace's top, as when you open a project); several items packed
 * together under their own names. An error, in words, for anything else.
 */
export async function uploadOfDrop(entries: DroppedEntry[], files: File[]): Promise<Upload | { error: string }> {
  if (entries.length === 1 && entries[0].isDirectory) {
    const root = entries[0]
    const packed = await packFolder(root)
    return { label: `folder ${root.name} (${packed.filter((e) => e.type === 'file').length} files, packed as a tar)`, body: tarBlob(packed), contentType: 'application/x-tar' }
  }
  if (entries.length <= 1 && files.length === 1) {
    const f = files[0]
    const t = archiveType(f.name, f.type)
    if (!t) return { error: `${f.name} is not an archive we can import. ${archiveHint}` }
    return { label: f.name, body: f, contentType: t }
  }
  if (entries.length > 1) {
    const packed: TarEntry[] = []
    for (const e of entries) await walk(e, '', packed)
    return { label: `${entries.length} items (packed as a tar)`, body: tarBlob(packed), contentType: 'application/x-tar' }
  }
  return { error: `Nothing to import was dropped. ${archiveHint}` }
}

/**
 * Packs the files of a folder chosen with a directory picker (each File
 * names itself with webkitRelativePath, "folder/sub/file") into a tar of the
 * folder's contents. Empty folders do not come through a picker.
 */
export function uploadOfFolderFiles(files: File[]): Upload | { error: string } {
  if (files.length === 0) return { error: `That folder is empty. ${archiveHint}` }
  const root = (files[0].webkitRelativePath || files[0].name).split('/')[0]
  const entries: TarEntry[] = files
    .map((f) => {
      const rel = f.webkitRelativePath || f.name
      const parts = rel.split('/')
      return { path: parts.length > 1 ? parts.slice(1).join('/') : rel, type: 'file' as const, body: f, mtime: Math.floor(f.lastModified / 1000) }
    })
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
  return { label: `folder ${root} (${entries.length} files, packed as a tar)`, body: tarBlob(entries), contentType: 'application/x-tar' }
}
