/// What the fleet tells every watcher of a queue.
package enum QueueNotice: Sendable, Equatable {
    /// Jobs were queued or given back.
    case jobs
    /// `runner cancel KEY --queue`.
    case cancel(key: String)
    /// A host asked `runner` to leave it alone for `milliseconds`.
    case pause(host: String, milliseconds: Int, runner: String)
    /// A job ended on `runner` (told while a watcher that serves a live page is alive).
    case finished(key: String, kind: String, status: String, runner: String)

    /// From a channel and a payload (nil: not one of the queue's).
    init?(channel: String, payload: String) {
        switch channel {
        case "runner_jobs":
            self = .jobs
        case "runner_cancel":
            self = .cancel(key: payload)
        case "runner_pause":
            // "milliseconds runner host"
            let words = payload.split(separator: " ", maxSplits: 2).map(String.init)
            guard words.count == 3, let milliseconds = Int(words[0]) else { return nil }
            self = .pause(host: words[2], milliseconds: milliseconds, runner: words[1])
        case "runner_events":
            guard let event = try? JSONParser.parse(Array(payload.utf8)), let key = event["key"]?.stringValue,
                let runner = event["runner"]?.stringValue
            else { return nil }
            self = .finished(
                key: key, kind: event["kind"]?.stringValue ?? "", status: event["status"]?.stringValue ?? "", runner: runner)
        default:
            return nil
        }
    }
}
