// The function app on a Flex Consumption (FC1) plan: Linux, Python 3.11, code from a blob container,
// every connection made as the user-assigned identity. This file sets every app setting; a change
// made in the portal is overwritten by the next provision.
param name string
param planName string
param location string
param tags object
param identityId string
param identityClientId string
param storageAccountName string
param deploymentContainerName string
param appInsightsName string
param brevoApiKeySecretUri string
param signingKeySecretUri string
param hashSecretSecretUri string
param senderEmail string
param bundlesContainerName string
param receiptsContainerName string
param contactQueuePrefix string
param contactQueueShards int

@description('BREVO_CONTACT_LIST_ID; empty for no list.')
param brevoContactListId string = ''

@description('Empty means https:// and the app\'s default host name.')
param publicBaseUrl string = ''

@description('STOREFRONT_RETIRED_PUBLIC_KEYS in base64; empty for none.')
param retiredPublicKeysBase64 string = ''

@minValue(1)
@maxValue(1000)
param maximumInstanceCount int = 40

// The limits, as infra/main.bicep describes them.
@minValue(1)
@maxValue(1000000)
param rateLimitPerHour int

@minValue(1)
@maxValue(1000000)
param recipientLimitPerDay int

@minLength(1)
param dailyCostCeilingUsd string

param agentRateLimitPerHour string
param agentSiteRateLimitPerHour string

@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int = 2048

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: appInsightsName
}

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    tier: 'FlexConsumption'
    name: 'FC1'
  }
  properties: {
    reserved: true
  }
}

resource site 'Microsoft.Web/sites@2024-04-01' = {
  name: name
  location: location
  tags: union(tags, { 'azd-service-name': 'api' })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    // Key Vault references resolve as this identity (the site has no system-assigned one).
    keyVaultReferenceIdentity: identityId
    // Not set, on purpose (tests/infra/checkov-skips.yml says why): ftpsState, which Azure rejects
    // on a Flex Consumption site (it has no FTP endpoint), and healthCheckPath, which Flex
    // Consumption does not act on. FTP and SCM passwords are switched off below instead.
    siteConfig: {
      minTlsVersion: '1.2'
      http20Enabled: true
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${storage.properties.primaryEndpoints.blob}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
      }
      runtime: {
        name: 'python'
        version: '3.11'
      }
    }
  }
}

// Deployments authenticate with Entra ID only: azd and Core Tools send the signed-in user's token.
// The site's FTP and SCM (Kudu) username and password, and so any publish profile, stop working.
resource ftpPublishingCredentials 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: site
  name: 'ftp'
  properties: {
    allow: false
  }
}

resource scmPublishingCredentials 'Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01' = {
  parent: site
  name: 'scm'
  properties: {
    allow: false
  }
}

// Flex Consumption takes the runtime from functionAppConfig: FUNCTIONS_WORKER_RUNTIME and
// FUNCTIONS_EXTENSION_VERSION are not set. Nor is AzureWebJobsStorage: the host and the app
// connect with the identity (AzureWebJobsStorage__*), and the account has no usable key.
// The literal STOREFRONT_* values are the code's defaults (shared/config/settings.py), written out so
// they can be read and changed here; tests/repo/test_infra.py checks that each literal is the
// default. The limits come from the azd environment, through infra/main.bicep.
resource appSettings 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: site
  name: 'appsettings'
  properties: {
    AzureWebJobsStorage__credential: 'managedidentity'
    AzureWebJobsStorage__clientId: identityClientId
    AzureWebJobsStorage__blobServiceUri: storage.properties.primaryEndpoints.blob
    AzureWebJobsStorage__queueServiceUri: storage.properties.primaryEndpoints.queue
    AzureWebJobsStorage__tableServiceUri: storage.properties.primaryEndpoints.table
    APPLICATIONINSIGHTS_CONNECTION_STRING: appInsights.properties.ConnectionString
    APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
    BREVO_API_KEY: '@Microsoft.KeyVault(SecretUri=${brevoApiKeySecretUri})'
    BREVO_BASE_URL: 'https://api.brevo.com/v3'
    BREVO_CONTACT_LIST_ID: brevoContactListId
    STOREFRONT_SIGNING_KEY: '@Microsoft.KeyVault(SecretUri=${signingKeySecretUri})'
    STOREFRONT_HASH_SECRET: '@Microsoft.KeyVault(SecretUri=${hashSecretSecretUri})'
    STOREFRONT_RETIRED_PUBLIC_KEYS: empty(retiredPublicKeysBase64) ? '' : base64ToString(retiredPublicKeysBase64)
    STOREFRONT_SENDER_EMAIL: senderEmail
    STOREFRONT_SENDER_NAME: 'Storefront'
    STOREFRONT_EMAIL_TEMPLATE_DIR: ''
    STOREFRONT_PUBLIC_BASE_URL: empty(publicBaseUrl) ? 'https://${site.properties.defaultHostName}' : publicBaseUrl
    STOREFRONT_ALLOWED_ORIGINS: ''
    STOREFRONT_TRUSTED_PROXY_HOPS: '0'
    STOREFRONT_FRONT_DOOR_ID: ''
    STOREFRONT_RATE_LIMIT_PER_HOUR: string(rateLimitPerHour)
    STOREFRONT_RECIPIENT_LIMIT_PER_DAY: string(recipientLimitPerDay)
    STOREFRONT_AGENT_RATE_LIMIT_PER_HOUR: agentRateLimitPerHour
    STOREFRONT_AGENT_SITE_RATE_LIMIT_PER_HOUR: agentSiteRateLimitPerHour
    STOREFRONT_UCP_PLATFORMS: ''
    STOREFRONT_TERMS_URL: ''
    STOREFRONT_PRIVACY_URL: ''
    STOREFRONT_AGENT_ORIGINS_ALLOWED: ''
    STOREFRONT_AGENT_ORIGINS_DENIED: ''
    STOREFRONT_DAILY_COST_CEILING_USD: dailyCostCeilingUsd
    STOREFRONT_COST_PER_PURCHASE_USD: '0.01'
    STOREFRONT_COST_COUNTER_SHARDS: '8'
    STOREFRONT_DOWNLOAD_TOKEN_TTL_SECONDS: '604800'
    STOREFRONT_BREVO_TIMEOUT_SECONDS: '10'
    STOREFRONT_STORAGE_TIMEOUT_SECONDS: '5'
    STOREFRONT_IDEMPOTENCY_LEASE_SECONDS: '600'
    STOREFRONT_IDEMPOTENCY_TTL_SECONDS: '86400'
    STOREFRONT_IDEMPOTENCY_FAIL_OPEN: 'false'
    STOREFRONT_IDEMPOTENCY_TABLE: 'idempotency'
    STOREFRONT_GOVERNANCE_TABLE: 'governance'
    STOREFRONT_LEDGER_TABLE: 'ledger'
    STOREFRONT_UCP_TABLE: 'ucpcheckouts'
    STOREFRONT_CONTACT_QUEUE: contactQueuePrefix
    STOREFRONT_CONTACT_QUEUE_SHARDS: string(contactQueueShards)
    STOREFRONT_RECEIPTS_CONTAINER: receiptsContainerName
    STOREFRONT_BUNDLES_CONTAINER: bundlesContainerName
  }
}

output name string = site.name
output url string = 'https://${site.properties.defaultHostName}'
