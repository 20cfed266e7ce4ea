// The storefront on Azure: one resource group holding a Flex Consumption function app (Python 3.11)
// that reaches storage, Key Vault and Application Insights with one user-assigned identity and no key.
// `azd up` deploys it; `az deployment sub what-if` previews it (see docs/deploying.md).
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('Name of the azd environment; the resource group and every resource name derive from it.')
param environmentName string

@minLength(1)
@description('Region of every resource; it must offer the Flex Consumption plan.')
@metadata({
  azd: {
    type: 'location'
  }
})
param location string

@minLength(3)
@description('STOREFRONT_SENDER_EMAIL: the sender of the fulfillment emails, a sender verified in Brevo.')
param senderEmail string

@secure()
@minLength(1)
@description('BREVO_API_KEY, kept in Key Vault.')
param brevoApiKey string

@secure()
@minLength(1)
@description('STOREFRONT_SIGNING_KEY: an EC P-256 private key, PKCS#8 PEM (literal \\n escapes allowed); the preprovision hook generates it once.')
param signingKey string

@secure()
@minLength(1)
@description('STOREFRONT_HASH_SECRET: the HMAC secret of every stored hash; the preprovision hook generates it once.')
param hashSecret string

@description('STOREFRONT_PUBLIC_BASE_URL; empty means https:// and the app\'s default host name.')
param publicBaseUrl string = ''

@description('STOREFRONT_RETIRED_PUBLIC_KEYS (a JWKS) in base64, so its quotes survive the parameters file; empty for none.')
param retiredPublicKeysBase64 string = ''

@description('Object id of whoever runs azd (azd fills it in); given Storage Blob Data Contributor on the bundles container to upload bundle files. Empty for nobody.')
param principalId string = ''

@minValue(1)
@maxValue(1000)
@description('Most instances the app scales out to; every purchase is free, so this also bounds the cost of a flood.')
param maximumInstanceCount int = 40

@description('BREVO_CONTACT_LIST_ID: the Brevo list (its id, a positive integer) the drained contacts are imported into; empty for none, and the contacts are then created one at a time.')
param brevoContactListId string = ''

// The store's limits (docs/governance.md), each an azd environment value of the setting's own
// name (`azd env set STOREFRONT_RATE_LIMIT_PER_HOUR 120`, then `azd provision`), defaulting to
// shared/config/settings.py's default. Whole numbers carry the app's bounds; the decimal and the
// optional ones are strings, which the preprovision hook checks against the same bounds.
@minValue(1)
@maxValue(1000000)
@description('STOREFRONT_RATE_LIMIT_PER_HOUR: purchases one client (address or verified agent) may make an hour.')
param rateLimitPerHour int = 5

@minValue(1)
@maxValue(1000000)
@description('STOREFRONT_RECIPIENT_LIMIT_PER_DAY: purchases one mailbox may receive a UTC day.')
param recipientLimitPerDay int = 3

@minLength(1)
@description('STOREFRONT_DAILY_COST_CEILING_USD: a decimal from 0 to 1000000; the day\'s purchases stop at it. Keep it under the Brevo plan\'s quota.')
param dailyCostCeilingUsd string = '5.00'

@description('STOREFRONT_AGENT_RATE_LIMIT_PER_HOUR: a whole number from 1 to 1000000; empty means the rate limit per hour.')
param agentRateLimitPerHour string = ''

@description('STOREFRONT_AGENT_SITE_RATE_LIMIT_PER_HOUR: a whole number from 1 to 1000000; empty means ten agents\' limits.')
param agentSiteRateLimitPerHour string = ''

var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = {
  'azd-env-name': environmentName
}
// The app's containers, created here so bundle files can be uploaded before the first purchase.
var bundlesContainerName = 'bundles'
var receiptsContainerName = 'receipts'
var deploymentContainerName = 'app-package'
// The contact queues: purchases spread over `contactQueueShards` queues `<prefix>-0` to `<prefix>-<n-1>`,
// a timer drains them into Brevo, and `<prefix>-poison` keeps what it could not import. The app
// settings STOREFRONT_CONTACT_QUEUE and STOREFRONT_CONTACT_QUEUE_SHARDS carry the same two values.
var contactQueuePrefix = 'storefront-contacts'
var contactQueueShards = 4

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: 'rg-${environmentName}'
  location: location
  tags: tags
}

module identity 'modules/identity.bicep' = {
  name: 'identity'
  scope: rg
  params: {
    name: 'id-${resourceToken}'
    location: location
    tags: tags
  }
}

module storage 'modules/storage.bicep' = {
  name: 'storage'
  scope: rg
  params: {
    name: 'st${resourceToken}'
    location: location
    tags: tags
    containerNames: [
      deploymentContainerName
      bundlesContainerName
      receiptsContainerName
    ]
    contactQueuePrefix: contactQueuePrefix
    contactQueueShards: contactQueueShards
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    logAnalyticsName: 'log-${resourceToken}'
    appInsightsName: 'appi-${resourceToken}'
    location: location
    tags: tags
  }
}

module vault 'modules/keyvault.bicep' = {
  name: 'keyvault'
  scope: rg
  params: {
    name: 'kv-${resourceToken}'
    location: location
    tags: tags
    brevoApiKey: brevoApiKey
    signingKey: signingKey
    hashSecret: hashSecret
  }
}

module roles 'modules/roles.bicep' = {
  name: 'roles'
  scope: rg
  params: {
    identityPrincipalId: identity.outputs.principalId
    storageAccountName: storage.outputs.name
    keyVaultName: vault.outputs.name
    appInsightsName: monitoring.outputs.appInsightsName
    bundlesContainerName: bundlesContainerName
    userPrincipalId: principalId
  }
}

module app 'modules/functionapp.bicep' = {
  name: 'functionapp'
  scope: rg
  // The app starts reading Key Vault and storage as soon as it exists: grant the roles first.
  dependsOn: [
    roles
  ]
  params: {
    name: 'func-${resourceToken}'
    planName: 'plan-${resourceToken}'
    location: location
    tags: tags
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    storageAccountName: storage.outputs.name
    deploymentContainerName: deploymentContainerName
    appInsightsName: monitoring.outputs.appInsightsName
    brevoApiKeySecretUri: vault.outputs.brevoApiKeySecretUri
    signingKeySecretUri: vault.outputs.signingKeySecretUri
    hashSecretSecretUri: vault.outputs.hashSecretSecretUri
    senderEmail: senderEmail
    publicBaseUrl: publicBaseUrl
    retiredPublicKeysBase64: retiredPublicKeysBase64
    bundlesContainerName: bundlesContainerName
    receiptsContainerName: receiptsContainerName
    contactQueuePrefix: contactQueuePrefix
    contactQueueShards: contactQueueShards
    brevoContactListId: brevoContactListId
    maximumInstanceCount: maximumInstanceCount
    rateLimitPerHour: rateLimitPerHour
    recipientLimitPerDay: recipientLimitPerDay
    dailyCostCeilingUsd: dailyCostCeilingUsd
    agentRateLimitPerHour: agentRateLimitPerHour
    agentSiteRateLimitPerHour: agentSiteRateLimitPerHour
  }
}

output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_FUNCTION_APP_NAME string = app.outputs.name
output AZURE_FUNCTION_APP_URL string = app.outputs.url
output AZURE_STORAGE_ACCOUNT_NAME string = storage.outputs.name
output AZURE_KEY_VAULT_NAME string = vault.outputs.name
output BUNDLES_CONTAINER_NAME string = bundlesContainerName
