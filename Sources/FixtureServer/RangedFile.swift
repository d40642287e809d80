import Foundation
import Synchronization

/// `/ranged/N`: a file of N bytes that answers range requests, correctly by default and wrongly
/// on purpose when asked, to test a client's resume. Byte `i` of version `v` is
/// `(i % 251 + i / 251 + 37 v) % 256`, so bytes appended at a wrong offset, or from another
/// version, never match.
///
/// | parameter | effect |
/// | --- | --- |
/// | `id=ID` | the file's state (its version, its cuts, the requests it saw) is kept per ID |
/// | `cut=K` | the first `cuts` answers (default 1) end after the file's byte K, the connection closed |
/// | `change=1` | the file changes (a new version, a new validator) after each cut |
/// | `validator=etag` (default), `weak`, `date`, `fresh`, `none` | a strong ETag; a weak one only; a Last-Modified long before the Date; one equal to the Date; no validator |
/// | `range=honor` (default) | `Range: bytes=N-` with a matching (or no) `If-Range`: 206 from N; N past the end: 416; a mismatching `If-Range`: 200 |
/// | `range=ignore` | 200 with the whole file |
/// | `range=earlier` | 206 from N - 1000 |
/// | `range=later` | 206 from N + 1000 |
/// | `range=total` | 206 from N, its Content-Range naming a total 5 bytes longer |
/// | `range=200cr` | 200 with `Content-Range: bytes N-…` and the bytes from N (the answer a naive client appends) |
/// | `range=416` | 416 to any range |
/// | `range=ifrange` | 206 from N even when `If-Range` does not match |
/// | `range=short` | as `honor`, but the first 206 carries only `short=K` bytes (default 65 546) while its Content-Range names the rest of the file: a body that ends early, cleanly |
/// | `range=novalidator` | as `honor`, but a 206 names no validator (no ETag, no Last-Modified) |
/// | `range=otheretag` | 206 from N whatever `If-Range` says, naming another ETag (`"other"`) |
/// | `gzip=1` | N zero bytes gzip-compressed (`Content-Encoding: gzip`), never ranged; `cut` counts coded bytes |
///
/// `/ranged-log?id=ID` answers what the file saw: `[{"range": …, "ifRange": …, "status": …, "from": …,
/// "headers": [every request header's name, in lower case]}]`.
enum RangedFile {
    private struct State {
        var cuts = 0
        var shorts = 0
        var log: [String] = []
    }

    private static let files = Mutex<[String: State]>([:])

    /// The bytes repeat every 251 * 256 bytes (the quotient has gone round 256 by then).
    static let period = 251 * 256

    /// One period of each version asked for so far, and once more its start, so that any
    /// piece of up to a period is one slice.
    private static let periods = Mutex<[Int: [UInt8]]>([:])

    /// `count` bytes (at most a period) from byte `from`: a slice of the version's period, so a
    /// test can fetch a GiB of it quickly.
    static func bytes(from: Int, count: Int, version: Int) -> ArraySlice<UInt8> {
        let cycle = periods.withLock { periods in
            if let cycle = periods[version] { return cycle }
            let cycle = (0..<(2 * period)).map { UInt8(truncatingIfNeeded: $0 % 251 + $0 / 251 + 37 * version) }
            periods[version] = cycle
            return cycle
        }
        let start = from % period
        return cycle[start..<(start + min(count, period))]
    }

    static func log(query: [String: String]) -> HTTPResponse {
        let lines = files.withLock { $0[query["id"] ?? ""]?.log ?? [] }
        return .json(200, "[" + lines.joined(separator: ",") + "]\n")
    }

    static func response(count: Int, request: HTTPRequest) -> HTTPResponse {
        let query = request.query
        let id = query["id"] ?? ""
        let cutAt = query["cut"].flatMap { Int($0) }
        let cuts = query["cuts"].flatMap { Int($0) } ?? 1
        let mode = query["range"] ?? "honor"
        let rangeField = request.header("range")
        let ifRange = request.header("if-range")
        return files.withLock { files in
            var state = files[id] ?? State()
            defer { files[id] = state }
            let version = query["change"] == "1" ? state.cuts : 0
            let now = Int(Date().timeIntervalSince1970)
            var response: HTTPResponse
            var from = 0
            var validator: String?
            if query["gzip"] == "1" {
                response = HTTPResponse(status: 200, contentType: "application/octet-stream", body: .bytes(GzipZeros.compress(count: count)))
                response.headers.append(("Content-Encoding", "gzip"))
                response.etag = "\"gz\(version)\""
            } else {
                response = HTTPResponse(status: 200, contentType: "application/octet-stream")
                switch query["validator"] ?? "etag" {
                case "weak": response.headers.append(("ETag", "W/\"v\(version)\""))
                case "date": response.lastModified = HTTPDate.fixtureLastModified - version * 60
                case "fresh": response.lastModified = now
                case "none": break
                default: response.etag = "\"v\(version)\""
                }
                validator = response.etag ?? response.lastModified.map(HTTPDate.format)
                let asked = rangeField.flatMap(Self.start(ofRange:))
                let ifRangeMatches = ifRange == nil || ifRange == validator
                if let asked {
                    switch mode {
                    case "ignore": break
                    case "416": response.status = 416
                    case "earlier": (response.status, from) = (206, max(0, asked - 1000))
                    case "later": (response.status, from) = (206, asked + 1000)
                    case "total": (response.status, from) = (206, asked)
                    case "200cr": from = asked
                    case "ifrange", "otheretag": (response.status, from) = (206, asked)
                    default:
                        if ifRangeMatches { (response.status, from) = asked < count ? (206, asked) : (416, 0) }
                    }
                }
                if response.status == 206 && mode == "novalidator" {
                    (response.etag, response.lastModified) = (nil, nil)
                }
                if response.status == 206 && mode == "otheretag" { response.etag = "\"other\"" }
                if response.status == 416 {
                    response.headers.append(("Content-Range", "bytes */\(count)"))
                } else {
                    from = min(from, count)
                    var length = count - from
                    if response.status == 206, mode == "short", state.shorts == 0 {
                        state.shorts += 1
                        length = min(length, query["short"].flatMap { Int($0) } ?? 65_546)
                    }
                    response.body = .ranged(from: from, count: length, version: version)
                    if response.status == 206 || mode == "200cr" && asked != nil {
                        let total = mode == "total" ? count + 5 : count
                        response.headers.append(("Content-Range", "bytes \(from)-\(count - 1)/\(total)"))
                    }
                }
            }
            response.headers.append(("Date", HTTPDate.format(now)))
            response.headers.append(("Accept-Ranges", "bytes"))
            if let cutAt, state.cuts < cuts, response.body.count > 0, cutAt - from < response.body.count {
                response.cutAfter = max(0, cutAt - from)
                state.cuts += 1
            }
            state.log.append(
                "{\"range\": \(json(rangeField)), \"ifRange\": \(json(ifRange)), \"status\": \(response.status), \"from\": \(from), "
                    + "\"headers\": [\(request.headers.map { json($0.name.lowercased()) }.joined(separator: ","))]}")
            return response
        }
    }

    /// N of `bytes=N-`; nil for any other range.
    private static func start(ofRange field: String) -> Int? {
        guard field.hasPrefix("bytes="), field.hasSuffix("-") else { return nil }
        return Int(field.dropFirst("bytes=".count).dropLast())
    }

    private static func json(_ text: String?) -> String {
        text.map { FixtureCatalog.jsonString($0) } ?? "null"
    }
}
