/// A lock per key shared with other processes, so that one key never runs in two processes at
/// once (the TaskManager already sees to one process).
///
/// The engine asks right after its TaskManager admitted a key; a key another process holds ends
/// `duplicate`, as one running in this process does. `SpoolKeyLock` is the spool's, built on
/// `flock`, which the kernel frees when the holder dies.
package protocol KeyLocking: Sendable {
    /// Takes the lock of `key`, and says why not when it cannot: held by another process, or
    /// not to be had at all (the lock file cannot be opened). A lock that cannot be taken is
    /// never taken as "no lock": the job does not run.
    func lock(key: String) async -> KeyLockOutcome
}

/// What asking for a key's lock came to.
package enum KeyLockOutcome: Sendable {
    /// Held by this process until `release` is called.
    case acquired(release: @Sendable () -> Void)
    /// Another process holds it.
    case heldElsewhere
    /// It could not be asked for (the reason, in words): the job must not run.
    case unavailable(String)
}
