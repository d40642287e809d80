/// Parents whose children run through the queue: a parent's record, stored with its children
/// queued (`QueueFinish.children`), waits for them; the runner that ends the last child (or
/// the next to claim the parent) completes the parent's record with their counts.
package protocol QueueParents: Sendable {
    /// The parent `id` whose children all ended, if `runner` is to complete it.
    func parentToComplete(id: Int64, runner: String) async throws(QueueError) -> QueueParentToComplete?
    /// Stores a parent's completed record (`finish.id` the parent's); returns the parents whose
    /// last child that was.
    func completeParent(_ finish: QueueFinish, runner: String) async throws(QueueError) -> [Int64]
}
