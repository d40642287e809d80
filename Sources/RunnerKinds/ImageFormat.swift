/// An image format the runner accepts: what `UIImage(data:)` decodes.
public enum ImageFormat: String, Sendable, CaseIterable {
    /// PNG, animated PNG (APNG) included.
    case png
    /// JPEG; its payloads end in `.jpg`, and `formats` takes `jpg` for it too.
    case jpeg
    /// GIF, 87a or 89a, still or animated.
    case gif
    /// WebP: lossy, lossless or extended, still or animated.
    case webp
    /// BMP with any DIB header (the 12-byte core one included), rows bottom-up or top-down.
    case bmp
    /// TIFF in either byte order, BigTIFF included; `formats` takes `tif` for it too.
    case tiff
    /// Windows icon: a directory of BMP or PNG images.
    case ico
    /// Windows cursor: an icon with hotspots, served as `image/x-icon` too.
    case cur
    /// HEIF, told by its `ftyp` brands (HEVC-coded or plain); `formats` takes `heif` for it too.
    case heic
    /// AVIF, a still image or a sequence.
    case avif
    /// JPEG XL, a bare codestream or in its container.
    case jxl

    /// The file extension a payload of this format is written with.
    public var fileExtension: String {
        switch self {
        case .jpeg: "jpg"
        default: rawValue
        }
    }

    /// The name people write: "PNG", "JPEG", "WebP", "HEIC", "JPEG XL", …
    public var displayName: String {
        switch self {
        case .png: "PNG"
        case .jpeg: "JPEG"
        case .gif: "GIF"
        case .webp: "WebP"
        case .bmp: "BMP"
        case .tiff: "TIFF"
        case .ico: "ICO"
        case .cur: "CUR"
        case .heic: "HEIC"
        case .avif: "AVIF"
        case .jxl: "JPEG XL"
        }
    }

    /// The media types an `Accept` header names for this format, most specific first.
    public var mediaTypes: [String] {
        switch self {
        case .png: ["image/apng", "image/png"]
        case .jpeg: ["image/jpeg"]
        case .gif: ["image/gif"]
        case .webp: ["image/webp"]
        case .bmp: ["image/bmp"]
        case .tiff: ["image/tiff"]
        case .ico: ["image/x-icon", "image/vnd.microsoft.icon"]
        case .cur: ["image/x-icon"]
        case .heic: ["image/heic", "image/heif"]
        case .avif: ["image/avif"]
        case .jxl: ["image/jxl"]
        }
    }

    /// The format a job's `formats` field names: the raw value, or "jpg", "tif", "heif".
    public init?(name: String) {
        switch name.lowercased() {
        case "jpg": self = .jpeg
        case "tif": self = .tiff
        case "heif": self = .heic
        case let other: self.init(rawValue: other)
        }
    }
}
