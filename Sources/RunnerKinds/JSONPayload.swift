import Foundation
import RunnerKit

/// Parsing a fetched payload that must be JSON, with a message that says what arrived instead.
enum JSONPayload {
    /// Parses the payload inside the attempt, off the concurrency pool when it is large.
    static func parse(_ payload: Payload, expected: String) async throws -> JSONValue {
        try await PayloadCheck.run(bytes: payload.count) { stop in try parseNow(payload, expected: expected, stop: stop) }
    }

    private static func parseNow(_ payload: Payload, expected: String, stop: PayloadCheck.Stop) throws -> JSONValue {
        let bytes = try payload.bytes()
        do {
            return try JSONParser.parse(bytes, shouldStop: { stop.isRaised })
        } catch where error.isStopped {
            throw CancellationError()  // nobody waits for it any more: the attempt has ended
        } catch {
            let arrived = ImageHeader.describe(payload.prefix)
            if arrived == "a JSON document" || arrived.hasPrefix("plain text") {
                throw JobFailure.failed("expected \(expected), but the payload is not valid JSON: \(error)")
            }
            throw JobFailure.failed("expected \(expected), but \(arrived) arrived")
        }
    }

    /// Fetches the job's JSON document; after a 304, re-reads the earlier payload instead, so
    /// a fan-out kind still starts its children.
    static func fetchDocument(_ context: JobContext, folder: String, expected: String) async throws -> (document: JSONValue, fetch: JobContext.Fetch) {
        let fetch = try await context.fetch(folder: folder)
        switch fetch {
        case .fetched(let response):
            return (try await parse(response.payload, expected: expected), fetch)
        case .notModified(let previous):
            do {
                let document = try await PayloadCheck.run(bytes: previous.bytes ?? 0) { stop in
                    try JSONParser.parse(context.previousPayload(), shouldStop: { stop.isRaised })
                }
                return (document, fetch)
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                throw JobFailure.failed("the server said not modified, but the earlier payload cannot be read: \(error)")
            }
        }
    }

    /// The size of what a fetch gave (after a 304, the earlier payload's).
    static func size(_ fetch: JobContext.Fetch) -> Int {
        switch fetch {
        case .fetched(let response): return response.payload.count
        case .notModified(let previous): return previous.bytes ?? 0
        }
    }

    /// The HTTP status a fetch ended with, for messages.
    static func status(_ fetch: JobContext.Fetch) -> Int {
        if case .fetched(let response) = fetch { return response.head.status }
        return 304
    }
}
