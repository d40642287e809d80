/// A lock per key shared with other processes, so that one key never runs in two processes at
/// once (the TaskManager already sees to one process).
///
/// The engine asks right after its TaskManager admitted a key; a key another process holds ends
/// `duplicate`, as one running in this process does. `SpoolKeyLock` is the spool's, built on
/// `flock`, which the kernel frees when the holder dies.
public protocol KeyLocking: Sendable {
    /// Takes the lock of `key` if no other process holds it, and returns what releases it;
    /// nil when another process holds it.
    func tryLock(key: String) -> (@Sendable () -> Void)?
}
