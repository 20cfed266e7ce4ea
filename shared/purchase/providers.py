"""Mail providers' rules for which of their addresses reach one mailbox, each with its source.

A row applies to every one of its domains. Its rules only merge addresses: `mailbox()` counts the
addresses a row merges as one mailbox, so a wrong rule makes two mailboxes share one limit and
never lets one get more. A row without rules records that its domains are separate namespaces (the
same user name on two of them is two accounts), which the fixture's "different" pairs rest on.
docs/governance.md#one-mailbox-many-spellings shows the table; a test keeps the two alike.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Provider:
    """One provider's rule for its domains, and where it is written."""

    name: str
    domains: tuple[str, ...]
    sources: tuple[tuple[str, str], ...]  # (title, URL); no URL where users report it
    documented: bool = True  # False: the rule rests on users' reports, not the provider's word
    one_namespace: bool = False  # a user name is one account on all the domains, the first its main
    ignored: str = ""  # characters the provider ignores in a user name
    equivalent: str = ""  # characters it reads as one another (the first stands for all)
    tags: str = ""  # what starts a tag besides "+", which does on every domain
    subdomains: bool = False  # `anything@user.<domain>` is `user+anything@<domain>`
    user_subdomains: bool = False  # all of `user.<domain>`, on each domain, is one user's mailbox


GOOGLE_DOTS = ("Dots don't matter in Gmail addresses", "https://support.google.com/mail/answer/7436150")
PROTON_USERNAME = ("How to change your username", "https://proton.me/support/change-username")
PROTON_DOMAINS = ("Types of email addresses and aliases", "https://proton.me/support/addresses-and-aliases")
YANDEX_DOMAINS = ("Yandex ID: email addresses", "https://yandex.com/support/id/authorization/email.html")
FASTMAIL_ADDRESSING = (
    "Plus addressing and subdomain addressing",
    "https://www.fastmail.help/hc/en-us/articles/360060591053",
)
FASTMAIL_UNDERSCORE = (
    "Two address resolving additions (2008)",
    "https://fastmail.blog/2008/01/24/two-address-resolving-additions/",
)
# Fastmail's list as its "Our domains" page gave it in January 2022 (read from the Delta Chat
# provider database's copy, _providers/fastmail.md, which names the page as its source).
FASTMAIL_LIST = ("Our domains", "https://www.fastmail.com/about/ourdomains/")
# fmt: off
FASTMAIL_DOMAINS = (
    "fastmail.com", "fastmail.fm", "fastmail.cn", "fastmail.co.uk", "fastmail.com.au", "fastmail.de",
    "fastmail.es", "fastmail.fr", "fastmail.im", "fastmail.in", "fastmail.jp", "fastmail.mx",
    "fastmail.net", "fastmail.nl", "fastmail.org", "fastmail.se", "fastmail.to", "fastmail.tw",
    "fastmail.uk", "fastmail.us", "123mail.org", "150mail.com", "150ml.com", "16mail.com",
    "2-mail.com", "4email.net", "50mail.com", "airpost.net", "allmail.net", "bestmail.us",
    "cluemail.com", "elitemail.org", "emailcorner.net", "emailengine.net", "emailengine.org",
    "emailgroups.net", "emailplus.org", "emailuser.net", "eml.cc", "f-m.fm", "fast-email.com",
    "fast-mail.org", "fastem.com", "fastemail.us", "fastemailer.com", "fastest.cc", "fastimap.com",
    "fastmailbox.net", "fastmessaging.com", "fea.st", "fmail.co.uk", "fmailbox.com", "fmgirl.com",
    "fmguy.com", "ftml.net", "h-mail.us", "hailmail.net", "imap-mail.com", "imap.cc", "imapmail.org",
    "inoutbox.com", "internet-e-mail.com", "internet-mail.org", "internetemails.net",
    "internetmailing.net", "jetemail.net", "justemail.net", "letterboxes.org", "mail-central.com",
    "mail-page.com", "mailandftp.com", "mailas.com", "mailbolt.com", "mailc.net", "mailcan.com",
    "mailforce.net", "mailftp.com", "mailhaven.com", "mailingaddress.org", "mailite.com",
    "mailmight.com", "mailnew.com", "mailsent.net", "mailservice.ms", "mailup.net", "mailworks.org",
    "ml1.net", "mm.st", "myfastmail.com", "mymacmail.com", "nospammail.net",
    "ownmail.net", "petml.com", "postinbox.com", "postpro.net", "proinbox.com", "promessage.com",
    "realemail.net", "reallyfast.biz", "reallyfast.info", "rushpost.com", "sent.as", "sent.at",
    "sent.com", "speedpost.net", "speedymail.org", "ssl-mail.com", "swift-mail.com",
    "the-fastest.net", "the-quickest.com", "theinternetemail.com", "veryfast.biz", "veryspeedy.net",
    "warpmail.net", "xsmail.com", "yepmail.net", "your-mail.com",
)
# fmt: on
# yahoo.com and its country domains: the 62 "international domains" Yahoo put under a DMARC
# reject policy in March 2016, as DMARC.org listed them, less its Groups domains (yahoogroups.*,
# yahoogrupper.dk, yahoogruppi.it) and the y7mail.com and yahooxtra.co.nz mail brands. Yahoo Japan
# (yahoo.co.jp) is another company's and not here.
YAHOO_LIST = (
    "Yahoo protects 62 additional domains with DMARC",
    "https://dmarc.org/2016/03/yahoo-protects-62-additional-domains-with-dmarc/",
)
# fmt: off
YAHOO_DOMAINS = (
    "yahoo.com", "yahoo.at", "yahoo.be", "yahoo.bg", "yahoo.ca", "yahoo.cl", "yahoo.co.hu",
    "yahoo.co.id", "yahoo.co.il", "yahoo.co.in", "yahoo.co.kr", "yahoo.co.nz", "yahoo.co.th",
    "yahoo.co.uk", "yahoo.co.za", "yahoo.com.ar", "yahoo.com.au", "yahoo.com.br", "yahoo.com.co",
    "yahoo.com.hk", "yahoo.com.hr", "yahoo.com.mx", "yahoo.com.my", "yahoo.com.pe", "yahoo.com.ph",
    "yahoo.com.sg", "yahoo.com.tr", "yahoo.com.tw", "yahoo.com.ua", "yahoo.com.ve", "yahoo.com.vn",
    "yahoo.cz", "yahoo.de", "yahoo.dk", "yahoo.ee", "yahoo.es", "yahoo.fi", "yahoo.fr", "yahoo.gr",
    "yahoo.hr", "yahoo.hu", "yahoo.ie", "yahoo.in", "yahoo.it", "yahoo.lt", "yahoo.lv", "yahoo.nl",
    "yahoo.no", "yahoo.pl", "yahoo.pt", "yahoo.ro", "yahoo.rs", "yahoo.se", "yahoo.si", "yahoo.sk",
)
# fmt: on
YANDEX = ("yandex.ru", "yandex.com", "yandex.by", "yandex.kz", "yandex.ua", "ya.ru")

PROVIDERS = (
    Provider("Google", ("gmail.com", "googlemail.com"), (GOOGLE_DOTS,), one_namespace=True, ignored="."),
    Provider(
        "Apple iCloud",
        ("icloud.com", "me.com", "mac.com"),
        (
            (
                "About your @icloud.com, @me.com, and @mac.com email addresses",
                "https://support.apple.com/en-us/118230",
            ),
        ),
        one_namespace=True,
    ),
    Provider(
        "Proton",
        ("proton.me", "protonmail.com", "protonmail.ch", "pm.me"),
        (PROTON_USERNAME, PROTON_DOMAINS),
        one_namespace=True,
        ignored="._-",
    ),
    Provider("Yandex", YANDEX, (YANDEX_DOMAINS,), one_namespace=True),
    Provider(
        "Yandex: dot and hyphen",
        YANDEX,
        (("Users' reports; Yandex's help does not say it", ""),),
        documented=False,
        equivalent=".-",
    ),
    Provider(
        "Fastmail",
        FASTMAIL_DOMAINS,
        (FASTMAIL_ADDRESSING, FASTMAIL_UNDERSCORE, FASTMAIL_LIST),
        equivalent="_-",
        subdomains=True,
    ),
    Provider(
        "Yahoo",
        YAHOO_DOMAINS,
        (
            (
                "Using Disposable Addresses",
                "http://help.yahoo.com/help/uk/bt/tutorials/mail/addressguard2.html",
            ),
            YAHOO_LIST,
        ),
        tags="-",
    ),
    Provider(
        "Yahoo: ymail.com and rocketmail.com",
        ("ymail.com", "rocketmail.com"),
        (
            (
                "Yahoo's 2008 announcement of the two domains, as internetnews.com quoted it",
                "https://www.internetnews.com/blog/vanity-thy-name-is-yahoo/",
            ),
        ),
    ),
    Provider(
        "Firefox Relay",
        ("mozmail.com",),
        (
            (
                "General questions about Relay email domains",
                "https://support.mozilla.org/en-US/kb/general-questions-about-relay-email-domains",
            ),
        ),
        user_subdomains=True,
    ),
    Provider(
        "SimpleLogin",
        ("simplelogin.com",),
        (
            ("Restore an alias", "https://simplelogin.io/docs/getting-started/restore-alias"),
            ("Delete an alias", "https://simplelogin.io/docs/getting-started/delete-alias"),
        ),
        user_subdomains=True,
    ),
    Provider(
        "addy.io",
        ("anonaddy.com", "anonaddy.me"),
        (
            (
                "What are the different kinds of aliases?",
                "https://addy.io/help/what-are-the-different-kinds-of-aliases/",
            ),
            ("Creating new email aliases", "https://addy.io/help/creating-new-email-aliases/"),
        ),
        user_subdomains=True,
    ),
    Provider(
        "Microsoft",
        ("outlook.com", "hotmail.com", "live.com", "msn.com"),
        (
            (
                "Manage aliases on your Microsoft account",
                "https://support.microsoft.com/help/12407/microsoft-account-manage-aliases",
            ),
            (
                "Plus addressing in Exchange Online",
                "https://learn.microsoft.com/en-us/exchange/recipients-in-exchange-online/plus-addressing-in-exchange-online",
            ),
        ),
    ),
    Provider(
        "Mail.ru",
        ("mail.ru", "inbox.ru", "list.ru", "bk.ru", "internet.ru"),
        (("Users' reports: a name taken at mail.ru can be registered at bk.ru", ""),),
        documented=False,
    ),
    Provider(
        "GMX and WEB.DE",
        ("gmx.de", "gmx.net", "gmx.com", "web.de"),
        (
            (
                "Doppelte E-Mail-Adresse – ist das möglich?",
                "https://newsroom.gmx.net/2015/07/31/doppelte-e-mail-adresse-ist-das-moeglich",
            ),
        ),
    ),
    Provider(
        "Tuta",
        ("tuta.com", "tutanota.com", "tutanota.de", "tutamail.com", "tuta.io", "keemail.me"),
        (("How to add alias email addresses", "https://tuta.com/support/"),),
    ),
)


def _index() -> dict[str, tuple[Provider, ...]]:
    index: dict[str, tuple[Provider, ...]] = {}
    for provider in PROVIDERS:
        for domain in provider.domains:
            index[domain] = (*index.get(domain, ()), provider)
    return index


_BY_DOMAIN = _index()


def providers_of(domain: str) -> tuple[Provider, ...]:
    """The rows whose rules apply to `domain` (its key, shared.purchase.domains.domain_key)."""
    return _BY_DOMAIN.get(domain, ())
