import Foundation
import Synchronization

/// Maps a request to its response, before fault modes: the seeds' payloads, the fixture images
/// and the helper routes.
///
/// | route | answer |
/// | --- | --- |
/// | `/data.json` | the Img.ly tree |
/// | `/entries/{id}.json` | the entry; 404 for `missingEntryIDs` and unknown ids, 410 for "gone" |
/// | `/images.json` | `[{"id": 1, "imageUrl": "<base>/images/<name>"}, …]`, plus one image that answers 404 |
/// | `/images/<name>` | the image bytes under its Content-Type; 404 for an unknown name |
/// | `/list/N?image=QUERY` | an image list of N elements, element i `{"id": i, "imageUrl": "<base>/images/png.png?i=i&QUERY"}` |
/// | `/object/N` | one JSON object of N members `{"m0": 0, "m1": 1, …}` (made once per N, then kept) |
/// | `/bytes/N` | N bytes, byte i being i % 256 |
/// | `/ranged/N` | N bytes that answer range requests, rightly or wrongly on purpose (`RangedFile`) |
/// | `/bomb/N` | a PNG header declaring 100000x100000 pixels (a decompression bomb), then N bytes |
/// | `/gzip/N` | N zero bytes sent gzip-compressed (`Content-Encoding: gzip`), about N/1000 bytes on the wire |
/// | `/redirect?to=URL` | 302 to URL |
/// | `/echo-headers` | the request's header fields as a JSON object, names lowercased |
/// | `/say?text=TEXT` | TEXT (percent-decoded, any bytes) as `application/json`: an answer a test chooses |
/// | `/` | a plain-text list of these routes |
enum FixtureRoutes {
    /// The name the image list gives to an image that does not exist.
    static let missingImageName = "missing.png"

    static func response(for request: HTTPRequest, baseURL: String) -> HTTPResponse {
        guard request.method == "GET" || request.method == "HEAD" else {
            var response = HTTPResponse.text(405, "only GET and HEAD are supported")
            response.headers.append(("Allow", "GET, HEAD"))
            return response
        }
        let path = request.path
        switch path {
        case "/":
            return .text(200, index)
        case "/data.json":
            return .resource(FixtureCatalog.treeJSON, contentType: "application/json")
        case "/images.json":
            return .resource(imageListJSON(baseURL: baseURL), contentType: "application/json")
        case "/echo-headers":
            return .json(200, echoJSON(request.headers))
        case "/say":
            return .json(200, request.query["text"] ?? "")
        case "/redirect":
            guard let location = request.query["to"], !location.isEmpty else {
                return .text(400, "redirect needs ?to=URL")
            }
            var response = HTTPResponse.text(302, "redirecting to \(location)")
            response.headers.append(("Location", location))
            return response
        default:
            break
        }
        if let name = component(of: path, after: "/images/") {
            guard let image = FixtureCatalog.images.first(where: { $0.name == name }) else {
                return .text(404, "no image named \(name)")
            }
            return .resource(image.bytes, contentType: image.contentType)
        }
        if let file = component(of: path, after: "/entries/"), file.hasSuffix(".json") {
            let id = String(file.dropLast(".json".count))
            if id == FixtureCatalog.goneEntryID {
                return .json(410, #"{"error": "gone", "id": \#(FixtureCatalog.jsonString(id))}"# + "\n")
            }
            guard FixtureCatalog.hasEntry(id: id) else {
                return .json(404, #"{"error": "not found", "id": \#(FixtureCatalog.jsonString(id))}"# + "\n")
            }
            return .resource(FixtureCatalog.entryJSON(id: id), contentType: "application/json")
        }
        if let count = component(of: path, after: "/list/") {
            guard let count = Int(count), (0...10_000_000).contains(count) else {
                return .text(400, "/list/N needs an integer N from 0 to 10000000")
            }
            return .json(200, longImageList(count: count, baseURL: baseURL, query: request.query["image"] ?? ""))
        }
        if let count = component(of: path, after: "/object/") {
            guard let count = Int(count), (0...10_000_000).contains(count) else {
                return .text(400, "/object/N needs an integer N from 0 to 10000000")
            }
            return HTTPResponse(status: 200, contentType: "application/json", body: .bytes(bigObject(count: count)))
        }
        if let count = component(of: path, after: "/bytes/") {
            guard let count = Int(count), count >= 0 else {
                return .text(400, "/bytes/N needs a non-negative integer N")
            }
            return HTTPResponse(status: 200, contentType: "application/octet-stream", body: .pattern(count: count))
        }
        if let count = component(of: path, after: "/ranged/") {
            guard let count = Int(count), count >= 0 else {
                return .text(400, "/ranged/N needs a non-negative integer N")
            }
            return RangedFile.response(count: count, request: request)
        }
        if path == "/ranged-log" {
            return RangedFile.log(query: request.query)
        }
        if let count = component(of: path, after: "/bomb/") {
            guard let count = Int(count), count >= 0 else {
                return .text(400, "/bomb/N needs a non-negative integer N")
            }
            return HTTPResponse(status: 200, contentType: "image/png", body: .headed(FixtureImages.bombHeader, padding: count))
        }
        if let count = component(of: path, after: "/gzip/") {
            guard let count = Int(count), count >= 0 else {
                return .text(400, "/gzip/N needs a non-negative integer N")
            }
            var response = HTTPResponse(
                status: 200, contentType: "application/octet-stream", body: .bytes(GzipZeros.compress(count: count)))
            response.headers.append(("Content-Encoding", "gzip"))
            return response
        }
        return .text(404, "no route for \(path)")
    }

    /// Answers 304 when the request's validators match the resource (RFC 9110 section 13.2.2):
    /// If-None-Match, when present, decides alone (weak comparison, `*` matches); otherwise
    /// If-Modified-Since not earlier than Last-Modified.
    static func evaluateConditional(_ response: HTTPResponse, request: HTTPRequest) -> HTTPResponse {
        guard response.status == 200, let etag = response.etag else {
            return response
        }
        if let field = request.header("if-none-match") {
            let tags = field.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            let matches = tags.contains { $0 == "*" || $0 == etag || $0 == "W/" + etag }
            return matches ? response.notModified : response
        }
        if let field = request.header("if-modified-since"), let since = HTTPDate.parse(field),
            let lastModified = response.lastModified, since >= lastModified
        {
            return response.notModified
        }
        return response
    }

    // MARK: - Payloads

    /// The seed's image list: every fixture image, then one that answers 404. Ids count from 1.
    static func imageListJSON(baseURL: String) -> String {
        let names = FixtureCatalog.images.map(\.name) + [missingImageName]
        let elements = names.enumerated().map { index, name in
            #"  {"id": \#(index + 1), "imageUrl": \#(FixtureCatalog.jsonString(baseURL + "/images/" + name))}"#
        }
        return "[\n" + elements.joined(separator: ",\n") + "\n]\n"
    }

    private static func echoJSON(_ headers: [(name: String, value: String)]) -> String {
        var fields: [String: String] = [:]
        for (name, value) in headers {
            fields[name] = fields[name].map { $0 + ", " + value } ?? value
        }
        let members = fields.sorted { $0.key < $1.key }.map {
            "  \(FixtureCatalog.jsonString($0.key)): \(FixtureCatalog.jsonString($0.value))"
        }
        return "{\n" + members.joined(separator: ",\n") + "\n}\n"
    }

    /// The percent-decoded single path component after `prefix`, or nil when the path is not
    /// `prefix` followed by one non-empty component.
    private static func component(of path: String, after prefix: String) -> String? {
        guard path.hasPrefix(prefix) else {
            return nil
        }
        let rest = path.dropFirst(prefix.count)
        guard !rest.isEmpty, !rest.contains("/") else {
            return nil
        }
        return rest.removingPercentEncoding ?? String(rest)
    }

    private static let index = """
        FixtureServer routes:
          /data.json            the Img.ly tree
          /entries/{id}.json    an entry (some answer 404, "gone" answers 410)
          /images.json          the image list
          /images/{name}        an image
          /bytes/N              N bytes (?chunked=1 for chunked coding)
          /ranged/N             N bytes answering range requests (?cut=K&range=MODE&validator=KIND, see RangedFile)
          /bomb/N               a PNG header declaring 100000x100000 pixels, then N bytes
          /gzip/N               N zero bytes, gzip-encoded (a gzip bomb for large N)
          /redirect?to=URL      302 to URL
          /echo-headers         the request's header fields as JSON
          /say?text=TEXT        TEXT as application/json (an answer of the caller's choosing)
        Fault parameters on any path: delay=MS status=N retryAfter=S hang=1 truncate=N reset=1 html=1 trickle=MS trickleAfter=N close=1
        """

    /// An image list of `count` elements, all naming the PNG, each with its own query.
    static func longImageList(count: Int, baseURL: String, query: String) -> String {
        var text = "["
        text.reserveCapacity(count * (baseURL.count + query.count + 50))
        let url = FixtureCatalog.jsonString(baseURL + "/images/png.png").dropLast()
        let extra = query.isEmpty ? "" : "&" + query
        for index in 0..<count {
            if index > 0 { text += ",\n" }
            text += #"{"id": \#(index), "imageUrl": \#(url)?i=\#(index)\#(extra)"}"#
        }
        return text + "]\n"
    }

    private static let bigObjects = Mutex<[Int: [UInt8]]>([:])

    /// `{"m0": 0, "m1": 1, …}` of `count` members, made once per count.
    static func bigObject(count: Int) -> [UInt8] {
        if let made = bigObjects.withLock({ $0[count] }) { return made }
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        bytes.reserveCapacity(count * 24 + 2)
        for index in 0..<count {
            if index > 0 { bytes.append(contentsOf: ", ".utf8) }
            let number = String(index)
            bytes.append(contentsOf: "\"m".utf8)
            bytes.append(contentsOf: number.utf8)
            bytes.append(contentsOf: "\": ".utf8)
            bytes.append(contentsOf: number.utf8)
        }
        bytes.append(contentsOf: "}\n".utf8)
        bigObjects.withLock { $0[count] = bytes }
        return bytes
    }
}
