/// A parent whose children all ended, as its record is completed.
package struct QueueParentToComplete: Sendable {
    package var id: Int64
    package var key: String
    /// Its record as its own fetch left it.
    package var record: String
    /// Its children by how they ended.
    package var counts: [String: Int]
    /// Elements that could not be made into jobs, and the first reason.
    package var invalid: Int
    package var firstInvalid: String?
    /// Every element: children queued and invalid ones.
    package var total: Int
}
