import RunnerKit

/// What an `image` job accepts (its `formats`, `maxPixels`, `minWidth` and `minHeight` fields)
/// and the check of a payload against it: the header read from the payload's own bytes, the
/// format accepted, no decompression bomb, large enough, and the body whole.
public struct ImageCheck: Sendable, Equatable {
    /// Pillow's limit: a header declaring more pixels is refused as a decompression bomb.
    public static let defaultMaxPixels = 178_956_970

    /// The formats accepted, in the order of preference the `Accept` header gives them.
    public var formats: [ImageFormat]
    /// The most pixels (width times height) a header may declare.
    public var maxPixels: Int
    /// The least width accepted, in pixels, judged as soon as the header has arrived; 0 takes any.
    public var minWidth: Int
    /// The least height accepted, in pixels, judged as soon as the header has arrived; 0 takes any.
    public var minHeight: Int

    /// Every format, in the order an `Accept` header prefers them: the compact modern ones first.
    public static let preference: [ImageFormat] = [.avif, .jxl, .heic, .webp, .png, .jpeg, .gif, .bmp, .tiff, .ico, .cur]

    /// A check accepting `formats` (kept in the order of `preference`, each once; an empty list
    /// accepts none), up to `maxPixels`, and at least `minWidth` by `minHeight`. The defaults
    /// accept any image of any format up to Pillow's limit.
    public init(
        formats: [ImageFormat] = ImageCheck.preference, maxPixels: Int = ImageCheck.defaultMaxPixels,
        minWidth: Int = 0, minHeight: Int = 0
    ) {
        self.formats = ImageCheck.preference.filter(formats.contains)
        self.maxPixels = maxPixels
        self.minWidth = minWidth
        self.minHeight = minHeight
    }

    /// The fields as `runner kinds` lists them.
    public static let parameters: [KindParameter] = [
        KindParameter(
            "formats", type: .strings, default: "all",
            "The formats accepted: \(preference.map(\.rawValue).joined(separator: ", ")) (also jpg, tif, heif); others end failed."),
        KindParameter(
            "maxPixels", type: .int, default: String(defaultMaxPixels),
            "The most pixels a header may declare; more is failed as a decompression bomb before anything is written."),
        KindParameter("minWidth", type: .int, default: "0", "The least width accepted, in pixels."),
        KindParameter("minHeight", type: .int, default: "0", "The least height accepted, in pixels."),
    ]

    /// Decodes the image kind's fields.
    public init(fields: inout JobFields) throws(JobSpecError) {
        var formats = ImageCheck.preference
        if let value = fields.value("formats") {
            guard case .array(let names) = value else {
                throw JobSpecError(field: "formats", "must be an array of format names, not \(value.typeDescription)")
            }
            guard !names.isEmpty else {
                throw JobSpecError(field: "formats", "must name at least one format")
            }
            formats = []
            for name in names {
                guard case .string(let text) = name else {
                    throw JobSpecError(field: "formats", "must hold strings, not \(name.typeDescription)")
                }
                if text.lowercased() == "svg" {
                    throw JobSpecError(field: "formats", "names svg, which is no image here: UIImage does not decode SVG")
                }
                guard let format = ImageFormat(name: text) else {
                    throw JobSpecError(
                        field: "formats",
                        "names an unknown format \"\(text)\"; known: \(ImageCheck.preference.map(\.rawValue).joined(separator: ", "))")
                }
                formats.append(format)
            }
        }
        let maxPixels = try fields.int("maxPixels") ?? ImageCheck.defaultMaxPixels
        guard maxPixels >= 1 else { throw JobSpecError(field: "maxPixels", "must be at least 1") }
        let minWidth = try fields.int("minWidth") ?? 0
        guard minWidth >= 0 else { throw JobSpecError(field: "minWidth", "must not be negative") }
        let minHeight = try fields.int("minHeight") ?? 0
        guard minHeight >= 0 else { throw JobSpecError(field: "minHeight", "must not be negative") }
        self.init(formats: formats, maxPixels: maxPixels, minWidth: minWidth, minHeight: minHeight)
    }

    // MARK: - Request

    /// The `Accept` header: the media types of the accepted formats, modern ones first, so a CDN
    /// that negotiates serves one of them; then anything, at a lower weight, for servers that do not.
    public var acceptHeader: String {
        var types: [String] = []
        for type in formats.flatMap(\.mediaTypes) where !types.contains(type) {
            types.append(type)
        }
        return (types + ["*/*;q=0.8"]).joined(separator: ",")
    }

    // MARK: - Check

    /// Why a payload is refused; `description` is one sentence.
    public struct Failure: Error, Equatable, CustomStringConvertible {
        public var description: String
        /// Whether the bytes were no image at all, or no header could be read (the caller adds
        /// what was served, such as the Content-Type).
        public var unreadable: Bool

        init(_ description: String, unreadable: Bool = false) {
            self.description = description
            self.unreadable = unreadable
        }
    }

    /// Checks a payload: `prefix` is its first bytes, `suffix` its last 64 (or fewer), `count` its
    /// length, and `body` reads all of it, which is asked for only when the format keeps what is
    /// needed past the prefix.
    package func check(
        prefix: [UInt8], suffix: [UInt8], count: Int, body: () throws -> [UInt8]
    ) throws(Failure) -> ImageHeader {
        let header: ImageHeader
        do {
            header = try ImageHeader.parse(prefix, totalLength: count)
        } catch let error where prefix.count < count && error.wantsMoreBytes {
            let whole: [UInt8]
            do {
                whole = try body()
            } catch {
                throw Failure("the payload could not be read back: \(error)")
            }
            do {
                header = try ImageHeader.parse(whole, totalLength: count)
            } catch {
                throw Self.failure(error, count: count)
            }
        } catch {
            throw Self.failure(error, count: count)
        }
        let name = header.format.displayName
        guard formats.contains(header.format) else {
            throw Failure(
                "expected an image in \(Self.list(formats.map(\.displayName))), but a \(name) image (\(header.width)x\(header.height)) arrived")
        }
        let pixels = header.width * header.height
        guard pixels <= maxPixels else {
            throw Failure(
                "the \(name) header declares \(header.width)x\(header.height) = \(pixels) pixels, more than maxPixels (\(maxPixels)): refused as a decompression bomb")
        }
        guard header.width >= minWidth, header.height >= minHeight else {
            throw Failure(
                "the \(name) image is \(header.width)x\(header.height), smaller than minWidth x minHeight (\(minWidth)x\(minHeight))")
        }
        guard ImageHeader.isComplete(header.format, prefix: Array(prefix.prefix(64)), suffix: suffix, totalLength: count) else {
            throw Failure("the \(name) image is truncated: only \(count) bytes arrived")
        }
        return header
    }

    /// Looks at the first bytes of a body as they arrive (a `Payload.Inspector`): once the header
    /// gives the size, a size over `maxPixels` or under `minWidth` x `minHeight` stops the transfer
    /// there, with the message the whole body would have got. Returns true once it has decided;
    /// whatever it cannot judge from the first bytes is judged when the body is whole.
    package func inspect(_ prefix: [UInt8]) throws(JobFailure) -> Bool {
        let header: ImageHeader
        do {
            header = try ImageHeader.declaredSize(prefix)
        } catch {
            return !error.wantsMoreBytes
        }
        let name = header.format.displayName
        let pixels = header.width * header.height
        if pixels > maxPixels {
            throw JobFailure.failed(
                "the \(name) header declares \(header.width)x\(header.height) = \(pixels) pixels, more than maxPixels (\(maxPixels)): refused as a decompression bomb")
        }
        if header.width < minWidth || header.height < minHeight {
            throw JobFailure.failed(
                "the \(name) image is \(header.width)x\(header.height), smaller than minWidth x minHeight (\(minWidth)x\(minHeight))")
        }
        return true
    }

    /// Checks a fetched response's body as a job's failure: what was served (its size and
    /// Content-Type) is named when the bytes are no image.
    package func check(_ response: JobContext.Response) throws(JobFailure) -> ImageHeader {
        let payload = response.payload
        do {
            return try check(payload)
        } catch {
            let served = error.unreadable ? " (\(payload.count) bytes, Content-Type \(response.head.headers["content-type"] ?? "none"))" : ""
            throw JobFailure.failed(error.description + served, httpStatus: response.head.status)
        }
    }

    /// Checks a fetched payload, reading it back from disk only when the format asks for more than
    /// its first bytes.
    package func check(_ payload: Payload) throws(Failure) -> ImageHeader {
        let prefix = payload.prefix
        let count = payload.count
        return try check(prefix: prefix, suffix: payload.suffix, count: count) {
            count <= prefix.count ? prefix : try payload.bytes()
        }
    }

    private static func failure(_ error: ImageHeader.Error, count: Int) -> Failure {
        switch error {
        case .cutShort(let format):
            Failure("the \(format.displayName) image is truncated: only \(count) bytes arrived")
        case .notAnImage, .truncated, .malformed:
            Failure(error.description, unreadable: true)
        }
    }

    /// "PNG", "PNG or JPEG", "PNG, JPEG or GIF".
    private static func list(_ names: [String]) -> String {
        guard names.count > 1 else { return names.first ?? "no format" }
        return names.dropLast().joined(separator: ", ") + " or " + names[names.count - 1]
    }

    // MARK: - Details

    /// The details of a result record: format, width and height; frames and animated for an
    /// animation; orientation with the display size when EXIF says the image is turned or mirrored.
    package static func details(_ header: ImageHeader) -> [(key: String, value: JSONValue)] {
        var details: [(key: String, value: JSONValue)] = [
            ("format", .string(header.format.rawValue)),
            ("width", JSONValue(header.width)),
            ("height", JSONValue(header.height)),
        ]
        if header.animated {
            details.append(("frames", JSONValue(header.frames)))
            details.append(("animated", .bool(true)))
        }
        if header.orientation != 1 {
            details.append(("orientation", JSONValue(header.orientation)))
            details.append(("displayWidth", JSONValue(header.displayWidth)))
            details.append(("displayHeight", JSONValue(header.displayHeight)))
        }
        return details
    }
}
