import Foundation
import Glibc
import Synchronization

/// Calls an action at a deadline on the monotonic clock, unless cancelled first: one thread
/// and one heap for every deadline of the process.
///
/// Made for many deadlines that are mostly cancelled (an attempt that finishes in time cancels
/// its own): arming is a heap insertion under a lock, cancelling a dictionary removal, and
/// the thread wakes only when the earliest deadline comes or a new earliest arrives. A sleeping
/// task per deadline would cost a task, a dispatch timer and a wake-up on cancellation each.
/// Actions run on the timer's thread and must be short (they cancel a task).
package final class DeadlineTimer: @unchecked Sendable {
    /// The timer of this process, which the command line injects into its engine.
    package static let shared = DeadlineTimer()

    private struct Entry {
        var at: UInt64
        var id: UInt64
    }

    // Guarded by `mutex`; `condition` is signalled when a new earliest deadline arrives.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var heap: [Entry] = []
    private var actions: [UInt64: @Sendable () -> Void] = [:]
    private var nextID: UInt64 = 0

    /// A deadline that is armed; `cancel()` before it fires and its action never runs.
    package struct Handle: Sendable {
        fileprivate let timer: DeadlineTimer
        fileprivate let id: UInt64

        /// Whether the action was still pending (and now never runs).
        @discardableResult
        package func cancel() -> Bool { timer.cancel(id) }
    }

    /// A timer with a thread of its own, which lives as long as the process.
    package init() {
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
        let thread = Thread { [self] in run() }  // the shared timer lives as long as the process
        thread.name = "runner-deadlines"
        thread.start()
    }

    /// Runs `action` once `duration` has passed (at once when it is not positive).
    package func schedule(after duration: Duration, _ action: @escaping @Sendable () -> Void) -> Handle {
        let (seconds, attoseconds) = duration.components
        let nanoseconds = max(0, seconds) &* 1_000_000_000 &+ max(0, attoseconds / 1_000_000_000)
        let at = Self.now() &+ UInt64(clamping: nanoseconds)
        pthread_mutex_lock(mutex)
        nextID += 1
        let id = nextID
        actions[id] = action
        if heap.count > 4096 && heap.count > 2 * actions.count { compact() }
        heap.append(Entry(at: at, id: id))
        siftUp(heap.count - 1)
        if heap[0].id == id { pthread_cond_signal(condition) }
        pthread_mutex_unlock(mutex)
        return Handle(timer: self, id: id)
    }

    /// Entries in the heap, cancelled ones included (for tests of compaction).
    var heapCount: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return heap.count
    }

    private func cancel(_ id: UInt64) -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        // The heap entry stays until its time comes and is then skipped: cheaper than a search.
        return actions.removeValue(forKey: id) != nil
    }

    private func run() {
        pthread_mutex_lock(mutex)
        while true {
            guard let first = heap.first else {
                pthread_cond_wait(condition, mutex)
                continue
            }
            if actions[first.id] == nil {
                popFirst()
                continue
            }
            let now = Self.now()
            if first.at > now {
                var until = timespec(tv_sec: Int(first.at / 1_000_000_000), tv_nsec: Int(first.at % 1_000_000_000))
                pthread_cond_timedwait(condition, mutex, &until)
                continue
            }
            popFirst()
            let action = actions.removeValue(forKey: first.id)
            pthread_mutex_unlock(mutex)
            action?()
            pthread_mutex_lock(mutex)
        }
    }

    private static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }

    // MARK: - The heap (earliest first)

    private func popFirst() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        siftDown(0)
    }

    private func siftDown(_ start: Int) {
        var index = start
        while true {
            let left = 2 * index + 1
            let right = left + 1
            var smallest = index
            if left < heap.count && heap[left].at < heap[smallest].at { smallest = left }
            if right < heap.count && heap[right].at < heap[smallest].at { smallest = right }
            if smallest == index { return }
            heap.swapAt(index, smallest)
            index = smallest
        }
    }

    /// Drops the entries of cancelled deadlines, which otherwise stay until their time (so a
    /// long timeout over a million jobs does not keep a million entries).
    private func compact() {
        heap.removeAll { actions[$0.id] == nil }
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    private func siftUp(_ start: Int) {
        var index = start
        while index > 0 {
            let parent = (index - 1) / 2
            guard heap[index].at < heap[parent].at else { return }
            heap.swapAt(index, parent)
            index = parent
        }
    }
}
