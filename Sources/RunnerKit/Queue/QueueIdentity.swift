/// Which queue this is, and which output folder is its: every watcher of a queue writes into
/// that one folder (a shared file system), so that a key's payload and record are the same
/// whichever watcher ran it.
package struct QueueIdentity: Sendable, Equatable {
    /// Made with the queue's tables, never changed.
    package var id: String
    /// The id in the stamp of the queue's output folder (nil: no watcher stamped one yet).
    package var folder: String?
    /// The folder's path as the watcher that stamped it saw it, and that watcher's name.
    package var output: String?
    package var stampedBy: String?

    package init(id: String, folder: String? = nil, output: String? = nil, stampedBy: String? = nil) {
        self.id = id
        self.folder = folder
        self.output = output
        self.stampedBy = stampedBy
    }
}
