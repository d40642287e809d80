import Synchronization

/// The answer to one `fetch` call, given exactly once by whichever side finishes first: the
/// transfer's completion or the caller's cancellation, which may come before the continuation
/// is even stored (then the continuation is resumed as soon as it arrives).
final class OneShotReply: Sendable {
    private let state = Mutex<(waiting: CheckedContinuation<FetchResponseHead, any Error>?, finished: Bool)>((nil, false))

    /// Stores the caller's continuation; false (and the continuation resumed) if already finished.
    func setContinuation(_ waiting: CheckedContinuation<FetchResponseHead, any Error>) -> Bool {
        let started = state.withLock { state -> Bool in
            guard !state.finished else { return false }
            state.waiting = waiting
            return true
        }
        if !started { waiting.resume(throwing: CancellationError()) }
        return started
    }

    var isFinished: Bool { state.withLock { $0.finished } }

    /// Resumes the caller once; later calls do nothing.
    func finish(_ result: Result<FetchResponseHead, any Error>) {
        let waiting = state.withLock { state -> CheckedContinuation<FetchResponseHead, any Error>? in
            guard !state.finished else { return nil }
            state.finished = true
            defer { state.waiting = nil }
            return state.waiting
        }
        waiting?.resume(with: result)
    }
}

/// A transfer that answers its caller through a `OneShotReply`.
protocol RepliesOnce: AnyObject {
    var reply: OneShotReply { get }
}

extension RepliesOnce {
    func setContinuation(_ waiting: CheckedContinuation<FetchResponseHead, any Error>) -> Bool { reply.setContinuation(waiting) }
    var isFinished: Bool { reply.isFinished }
    func finish(_ result: Result<FetchResponseHead, any Error>) { reply.finish(result) }
}
