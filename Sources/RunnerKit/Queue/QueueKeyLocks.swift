/// One task per key across the fleet, for a job whose claim did not lock its key (another
/// runner held it then): the key taken for one runner at a time, under its lease, and let go of.
/// (A claim locks the keys no runner holds, and `QueueStore.finish` lets go of keys with the
/// records, so most jobs need neither call.)
package protocol QueueKeyLocks: Sendable {
    /// Takes `key` for `runner` unless another runner holds it under a live lease.
    func lockKey(_ key: String, runner: String) async throws(QueueError) -> Bool
    /// Lets go of `runner`'s `keys`.
    func unlockKeys(_ keys: [String], runner: String) async throws(QueueError)
}
