/**
 * The Redis Cluster hash slot of a key (CRC16-XMODEM of its hash tag, mod 16384), as `CLUSTER
 * KEYSLOT` computes it. Used to tell which node a key lives on without asking Redis.
 */
export function keySlot(key: string): number {
  const bytes = Buffer.from(hashTag(key));
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++)
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}

/** The part of the key Redis hashes: the first non-empty `{...}`, else the whole key. */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  if (open === -1) return key;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}
