// How times, sizes and ids read on the page.

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—'
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return iso
  return d.toLocaleString()
}

export function formatClock(iso: string): string {
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return iso
  return d.toLocaleTimeString()
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`
  const units = ['KiB', 'MiB', 'GiB', 'TiB']
  let v = n / 1024
  let i = 0
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024
    i++
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`
}

/** An id short enough to read: the part after its prefix, cut to 8 characters. */
export function shortId(id: string): string {
  const rest = id.includes('_') ? id.slice(id.indexOf('_') + 1) : id
  return rest.slice(0, 8)
}

/** A retrieval confidence (0 to 1) as it reads everywhere: two decimals, "0.86". */
export function formatConfidence(n: number): string {
  return Number.isFinite(n) ? n.toFixed(2) : '—'
}

/**
 * A ranking score: BM25 scores run into the tens, fused (reciprocal rank)
 * scores are hundredths, so small ones keep two significant digits rather
 * than all reading 0.00.
 */
export function formatScore(n: number): string {
  if (!Number.isFinite(n)) return '—'
  const a = Math.abs(n)
  if (a >= 10) return n.toFixed(1)
  if (a >= 0.1 || a === 0) return n.toFixed(2)
  return n.toPrecision(2)
}

/** How long something took, from two ISO times (or start and now): "45 s", "3 min 5 s", "2 h 4 min". */
export function formatDuration(from: string | null | undefined, to: string | null | undefined, now: number = Date.now()): string {
  if (!from) return '—'
  const start = new Date(from).getTime()
  const end = to ? new Date(to).getTime() : now
  if (Number.isNaN(start) || Number.isNaN(end)) return '—'
  const s = Math.max(0, Math.round((end - start) / 1000))
  if (s < 60) return `${s} s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m} min ${s % 60} s`
  return `${Math.floor(m / 60)} h ${m % 60} min`
}
